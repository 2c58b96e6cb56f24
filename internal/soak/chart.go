package soak

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

// series is one line of a panel.
type series struct {
	name  string
	color string
	value func(sample) float64
}

type panel struct {
	title string
	unit  string
	lines []series
	// clip, when positive, is the quantile of the values that sets the
	// top of the scale, so that a spike does not flatten the rest.
	clip float64
}

var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

// Layout of the picture, in pixels.
const (
	chartWidth  = 1000
	panelHeight = 190
	marginLeft  = 70
	marginRight = 20
	panelGap    = 50
	top         = 60
)

// draw writes the samples as an SVG picture: one panel each for memory,
// table sizes, dead tuples and latency, with the faults behind them.
func (s *soak) draw(path string, steadyFrom, steadyTo time.Time) error {
	samples, marks := s.samples.all()
	var mem []series
	for i := range s.instances {
		name := fmt.Sprintf("instance %d", i)
		if i == 0 {
			name += " (never killed)"
		}
		mem = append(mem, series{name: name, color: palette[i%len(palette)], value: func(x sample) float64 { return x.rss[i] }})
	}
	panels := []panel{
		{title: "Resident memory of each instance", unit: "MiB", lines: mem},
		{title: "Table size with indexes", unit: "MiB", lines: []series{
			{name: "outbox_messages", color: palette[0], value: func(x sample) float64 { return x.outboxMiB }},
			{name: "events", color: palette[1], value: func(x sample) float64 { return x.eventsMiB }},
		}},
		{title: "Dead tuples, and messages waiting in the outbox", unit: "rows", clip: 0.99, lines: []series{
			{name: "outbox_messages dead", color: palette[0], value: func(x sample) float64 { return x.outboxDead }},
			{name: "events dead", color: palette[1], value: func(x sample) float64 { return x.eventsDead }},
			{name: "outbox waiting", color: palette[2], value: func(x sample) float64 { return x.pending }},
		}},
		{title: "Request latency per sample interval", unit: "ms", clip: 0.98, lines: []series{
			{name: "p50", color: palette[0], value: func(x sample) float64 { return x.p50 }},
			{name: "p99", color: palette[3], value: func(x sample) float64 { return x.p99 }},
		}},
	}
	height := top + len(panels)*(panelHeight+panelGap) + 10
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", chartWidth, height, chartWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="16" font-weight="bold">%s</text>`+"\n", marginLeft, html.EscapeString(s.title()))
	fmt.Fprintf(&b, `<text x="%d" y="42" fill="#555">minutes since start; red band: PostgreSQL restart; yellow: SMTP refusing; blue: drain bursts; grey lines: SIGKILL of an instance; dashed: the steady phase</text>`+"\n", marginLeft)

	end := s.began
	if len(samples) > 0 {
		end = samples[len(samples)-1].at
	}
	span := max(end.Sub(s.began).Minutes(), 1.0/60)
	plotW := float64(chartWidth - marginLeft - marginRight)
	x := func(t time.Time) float64 { return marginLeft + t.Sub(s.began).Minutes()/span*plotW }
	faults := s.faults.all()
	for i, p := range panels {
		y0 := float64(top + i*(panelHeight+panelGap) + 20)
		drawPanel(&b, p, samples, x, y0, plotW, func() {
			for _, f := range faults {
				switch f.kind {
				case "postgres":
					band(&b, x(f.at)-2, max(x(f.until), x(f.at)+3), y0, "#e06060")
				case "smtp":
					band(&b, x(f.at), x(f.until), y0, "#f6e7a0")
				}
			}
			for _, m := range marks {
				band(&b, x(m.from), x(m.due), y0, "#a8c8f0")
			}
			for _, f := range faults {
				if f.kind == "kill" {
					fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999" stroke-width="0.8"/>`+"\n", x(f.at), y0, x(f.at), y0+panelHeight)
				}
			}
			for _, t := range []time.Time{steadyFrom, steadyTo} {
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333" stroke-dasharray="4 3"/>`+"\n", x(t), y0, x(t), y0+panelHeight)
			}
		})
		// The time axis.
		step := niceStep(span / 10)
		for m := 0.0; m <= span+1e-9; m += step {
			px := marginLeft + m/span*plotW
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%s</text>`+"\n", px, y0+panelHeight+14, trimFloat(m))
		}
	}
	b.WriteString("</svg>\n")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("soak: write the picture: %w", err)
	}
	return nil
}

func (s *soak) title() string {
	return fmt.Sprintf("Soak of %d instances, %s steady load, kill every %s, PostgreSQL restarted at %s",
		s.cfg.Instances, s.cfg.Duration, s.cfg.KillEvery, s.cfg.RestartPostgresAt)
}

func band(b *bytes.Buffer, x1, x2, y0 float64, color string) {
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="%s" opacity="0.6"/>`+"\n", x1, y0, max(x2-x1, 1), panelHeight, color)
}

func drawPanel(b *bytes.Buffer, p panel, samples []sample, x func(time.Time) float64, y0, plotW float64, background func()) {
	var values []float64
	for _, l := range p.lines {
		for _, s := range samples {
			if v := l.value(s); !math.IsNaN(v) {
				values = append(values, v)
			}
		}
	}
	top := 1.0
	if len(values) > 0 {
		slices.Sort(values)
		top = values[len(values)-1]
		if p.clip > 0 {
			top = values[int(p.clip*float64(len(values)-1))] * 1.3
		}
		top = max(top*1.1, 1e-9)
	}
	step := niceStep(top / 4)
	top = math.Ceil(top/step) * step
	y := func(v float64) float64 { return y0 + panelHeight - min(v, top)/top*panelHeight }

	fmt.Fprintf(b, `<text x="%d" y="%.1f" font-weight="bold">%s (%s)</text>`+"\n", marginLeft, y0-6, html.EscapeString(p.title), p.unit)
	background()
	fmt.Fprintf(b, `<rect x="%d" y="%.1f" width="%.1f" height="%d" fill="none" stroke="#333"/>`+"\n", marginLeft, y0, plotW, panelHeight)
	for v := 0.0; v <= top+1e-9; v += step {
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", marginLeft, y(v), marginLeft+plotW, y(v))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", marginLeft-6, y(v)+4, trimFloat(v))
	}
	for i, l := range p.lines {
		var path strings.Builder
		pen := false
		for _, s := range samples {
			v := l.value(s)
			if math.IsNaN(v) {
				pen = false
				continue
			}
			cmd := "L"
			if !pen {
				cmd = "M"
			}
			fmt.Fprintf(&path, "%s%.1f %.1f ", cmd, x(s.at), y(v))
			pen = true
		}
		fmt.Fprintf(b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.5"/>`+"\n", strings.TrimSpace(path.String()), l.color)
		lx := float64(marginLeft) + plotW - 190
		ly := y0 + 16 + float64(i)*15
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="12" height="3" fill="%s"/><text x="%.1f" y="%.1f">%s</text>`+"\n", lx, ly-4, l.color, lx+16, ly, html.EscapeString(l.name))
	}
}

// niceStep rounds d up to 1, 2 or 5 times a power of ten.
func niceStep(d float64) float64 {
	if d <= 0 || math.IsNaN(d) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(d)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= d {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "" || s == "-0" {
		return "0"
	}
	return s
}
