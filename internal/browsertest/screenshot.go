package browsertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// Screenshot writes a PNG of the whole page of ctx's tab, beyond the
// viewport, to name (".png" is added when name lacks it) in t.ArtifactDir(),
// logs its path and returns it. The directory is removed after the test
// unless `go test -artifacts` keeps it, in _artifacts under -outputdir,
// which is by default the directory where go test runs. Screenshot fails t
// when name is not a plain file name or the screenshot cannot be taken or
// written.
func Screenshot(t testing.TB, ctx context.Context, name string) string {
	t.Helper()
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." {
		t.Fatalf("browsertest: screenshot name %q is not a plain file name", name)
	}
	if !strings.HasSuffix(name, ".png") {
		name += ".png"
	}
	d := timeoutOf(ctx)
	sctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	// A quality of 100 makes chromedp ask for a PNG, not a JPEG.
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("browsertest: screenshot %s: %v", name, err)
	}
	path := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatalf("browsertest: %v", fmt.Errorf("write the screenshot: %w", err))
	}
	t.Logf("browsertest: screenshot %s", path)
	return path
}
