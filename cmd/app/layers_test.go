package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// goListed is a package as go list describes it.
type goListed struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// TestOnlyTheInfrastructureLinksWatermill lists every package of the
// module with go list and fails for each that links a Watermill package,
// directly or through its imports, unless it is infrastructure: a domain
// package, and the contracts the domain stands on, stay free of the
// message library, so that the domain can be read, tested and reused
// without it. The failure names the import that brings Watermill in.
func TestOnlyTheInfrastructureLinksWatermill(t *testing.T) {
	t.Parallel()
	const (
		module = "github.com/eventsourced/accounts"
		// watermill begins the import paths of Watermill and its
		// Pub/Subs.
		watermill = "github.com/ThreeDotsLabs/"
	)
	// infrastructure are the packages, each with those below it, that may
	// link Watermill: the relay, the runner of asynchronous projections,
	// the publishers, the backends, and what wires, configures, operates
	// or measures them. No other package of the module may: not the
	// domain (internal/user, and every domain package to come), nor the
	// contracts it is written against (outbox, projections, publish,
	// eventstore, uow, ...).
	infrastructure := []string{
		"cmd",
		"internal/outbox/relay",
		"internal/projections/async",
		"internal/publish/forward",
		"internal/publish/kafkabroker",
		"internal/publish/natsbroker",
		"internal/publish/webhook",
		"internal/routerlog",
		"internal/backend",
		"internal/postgres",
		"internal/sqlite",
		"internal/config",
		"internal/operator",
		"internal/bench",
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command lists the packages: %v", err)
	}
	cmd := exec.CommandContext(t.Context(), goTool, "list", "-json=ImportPath,Imports,Deps", module+"/...")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]goListed{}
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p goListed
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list: %v", err)
		}
		pkgs[strings.TrimPrefix(p.ImportPath, module+"/")] = p
	}
	links := func(path string) (string, bool) {
		if strings.HasPrefix(path, watermill) {
			return path, true
		}
		p, ok := pkgs[strings.TrimPrefix(path, module+"/")]
		if !ok {
			return "", false
		}
		i := slices.IndexFunc(p.Deps, func(d string) bool { return strings.HasPrefix(d, watermill) })
		if i < 0 {
			return "", false
		}
		return p.Deps[i], true
	}
	infra := func(path string) bool {
		return slices.ContainsFunc(infrastructure, func(prefix string) bool {
			return path == prefix || strings.HasPrefix(path, prefix+"/")
		})
	}

	// What the rule stands on: the domain is listed, and the check sees
	// Watermill where it is.
	for _, domain := range []string{"internal/user", "internal/user/mail"} {
		if _, ok := pkgs[domain]; !ok {
			t.Errorf("go list did not list %s", domain)
		}
	}
	if _, ok := links(module + "/internal/outbox/relay"); !ok {
		t.Error("internal/outbox/relay links no Watermill package, by this test's reading; the check sees nothing")
	}
	paths := slices.Sorted(maps.Keys(pkgs))
	for _, prefix := range infrastructure {
		if !slices.ContainsFunc(paths, func(path string) bool {
			return path == prefix || strings.HasPrefix(path, prefix+"/")
		}) {
			t.Errorf("infrastructure names %s, which holds no package", prefix)
		}
	}

	for _, path := range paths {
		if infra(path) {
			continue
		}
		p := pkgs[path]
		wm, ok := links(p.ImportPath)
		if !ok {
			continue
		}
		var through []string
		for _, imp := range p.Imports {
			if _, ok := links(imp); ok {
				through = append(through, strings.TrimPrefix(imp, module+"/"))
			}
		}
		slices.Sort(through)
		t.Errorf("%s links %s through %s: only infrastructure may link Watermill; move what needs it out of the domain and its contracts", path, wm, strings.Join(through, ", "))
	}
}
