package dashboard

import (
	"fmt"
	"html/template"
	"math"
	"net/url"
	"strconv"
	"strings"
)

// The charts are SVG written here as strings of numbers and escaped text (html/template
// cannot build SVG geometry); every text that reaches them goes through
// template.HTMLEscapeString.

var funcs = template.FuncMap{
	"f":       func(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) },
	"optf":    optf,
	"pct":     pct,
	"short":   shortID,
	"time":    fmtTime,
	"path":    url.PathEscape,
	"eloBars": eloBars,
	"nsBar":   nsBar,
	"heatmap": heatmapSVG,
	"heatCSS": heatColor,
	"strip":   stripSVG,
	"progress": func(c Campaign) template.HTML {
		return progressSVG(c)
	},
	"add": func(a, b int) int { return a + b },
}

func optf(v *float64, prec int) string {
	if v == nil {
		return "–"
	}
	return strconv.FormatFloat(*v, 'f', prec, 64)
}

func pct(v *float64) string {
	if v == nil {
		return "–"
	}
	return strconv.FormatFloat(100**v, 'f', 0, 64) + " %"
}

// scale maps [lo, hi] onto [0, width] pixels.
type scale struct{ lo, hi, width float64 }

func (s scale) x(v float64) float64 {
	if s.hi <= s.lo {
		return s.width / 2
	}
	return math.Round(10*(v-s.lo)/(s.hi-s.lo)*s.width) / 10
}

// eloBars returns one SVG per leaderboard row: its 95 % interval as a bar and its Elo as a
// tick, on one scale shared by every row (so the bars compare).
func eloBars(rows []LeaderRow) []template.HTML {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		lo, hi = math.Min(lo, r.EloCI[0]), math.Max(hi, r.EloCI[1])
	}
	pad := (hi - lo) * 0.03
	sc := scale{lo - pad, hi + pad, 200}
	out := make([]template.HTML, len(rows))
	for i, r := range rows {
		out[i] = barSVG(sc, r.EloCI[0], r.EloCI[1], r.Elo, fmt.Sprintf("Elo %.0f, 95%% interval %.0f to %.0f", r.Elo, r.EloCI[0], r.EloCI[1]), "elo")
	}
	return out
}

// nsBar draws a normalized score and its interval on [0, 1] (wider when the interval is).
func nsBar(r LeaderRow) template.HTML {
	if r.NormalizedScore == nil {
		return ""
	}
	lo, hi := *r.NormalizedScore, *r.NormalizedScore
	if r.NormalizedScoreCI != nil {
		lo, hi = r.NormalizedScoreCI[0], r.NormalizedScoreCI[1]
	}
	sc := scale{math.Min(0, lo), math.Max(1, hi), 120}
	return barSVG(sc, lo, hi, *r.NormalizedScore, fmt.Sprintf("normalized score %.3f, 95%% interval %.3f to %.3f", *r.NormalizedScore, lo, hi), "ns")
}

func barSVG(sc scale, lo, hi, mid float64, label, class string) template.HTML {
	x0, x1, xm := sc.x(lo), sc.x(hi), sc.x(mid)
	w := math.Max(x1-x0, 1)
	return template.HTML(fmt.Sprintf(`<svg class="bar %s" width="%g" height="14" viewBox="0 0 %g 14" role="img"><title>%s</title><line x1="0" y1="7" x2="%g" y2="7" class="axis"/><rect x="%g" y="3" width="%g" height="8" rx="2" class="ci"/><rect x="%g" y="1" width="2" height="12" class="pt"/></svg>`,
		class, sc.width, sc.width, template.HTMLEscapeString(label), sc.width, x0, w, math.Max(xm-1, 0)))
}

// heatColor is a cell's fill: white at 0, dark blue at 1 (grey when there is no run).
func heatColor(v *float64) string {
	if v == nil {
		return "#ddd"
	}
	t := math.Min(math.Max(*v, 0), 1)
	r := int(math.Round(247 - t*(247-8)))
	g := int(math.Round(251 - t*(251-69)))
	b := int(math.Round(255 - t*(255-148)))
	return fmt.Sprintf("#%02x%02x%02x", r, g, b)
}

// heatmapSVG draws agents (rows) × tasks (columns), each cell its mean normalized score,
// each row and column label a link to the agent's or task's page.
func heatmapSVG(hm Heatmap) template.HTML {
	const cw, ch, left, top = 44, 20, 150, 130
	var b strings.Builder
	// Room on the right for the last column's slanted label.
	w, hgt := left+cw*len(hm.Tasks)+130, top+ch*len(hm.Agents)+10
	fmt.Fprintf(&b, `<svg class="heatmap" width="%d" height="%d" viewBox="0 0 %d %d" role="img"><title>normalized score per agent and task</title>`, w, hgt, w, hgt)
	for j, t := range hm.Tasks {
		x := left + cw*j + cw/2
		fmt.Fprintf(&b, `<a href="/tasks/%s"><text class="col" transform="translate(%d %d) rotate(-40)">%s</text></a>`,
			template.HTMLEscapeString(url.PathEscape(t)), x, top-6, template.HTMLEscapeString(truncate(t, 22)))
	}
	for i, a := range hm.Agents {
		y := top + ch*i
		fmt.Fprintf(&b, `<a href="/agents/%s"><text class="row" x="%d" y="%d">%s</text></a>`,
			template.HTMLEscapeString(url.PathEscape(a)), left-6, y+ch-6, template.HTMLEscapeString(truncate(a, 22)))
	}
	for k, c := range hm.Cells {
		i, j := k/max(len(hm.Tasks), 1), k%max(len(hm.Tasks), 1)
		val := "no counted run"
		if c.Score != nil {
			val = strconv.FormatFloat(*c.Score, 'f', 3, 64)
		}
		x, y := left+cw*j, top+ch*i
		fmt.Fprintf(&b, `<rect class="cell" x="%d" y="%d" width="%d" height="%d" fill="%s"><title>%s · %s: %s (%d runs)</title></rect>`,
			x, y, cw-2, ch-2, heatColor(c.Score), template.HTMLEscapeString(c.Agent), template.HTMLEscapeString(c.Task), val, c.Runs)
		if c.Score != nil {
			class := "v"
			if *c.Score > 0.55 {
				class = "v dark"
			}
			fmt.Fprintf(&b, `<text class="%s" x="%d" y="%d">%s</text>`, class, x+cw/2-1, y+ch-6, strconv.FormatFloat(*c.Score, 'f', 2, 64))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// stripSVG draws every valid run's raw score of a task, one row per agent, on the task's
// score range (the SOTA marked), so the spread over seeds shows.
func stripSVG(v TaskView) template.HTML {
	agents := []string{}
	seen := map[string]bool{}
	lo, hi := v.SOTA, v.SOTA
	for _, r := range v.Runs {
		if r.Score == nil || !r.Valid {
			continue
		}
		if !seen[r.Agent] {
			seen[r.Agent] = true
			agents = append(agents, r.Agent)
		}
		lo, hi = math.Min(lo, *r.Score), math.Max(hi, *r.Score)
	}
	if len(agents) == 0 {
		return ""
	}
	const left, width, rowH = 150, 400, 18
	sc := scale{lo - (hi-lo)*0.03, hi + (hi-lo)*0.03, width}
	row := map[string]int{}
	for i, a := range agents {
		row[a] = i
	}
	var b strings.Builder
	h := rowH*len(agents) + 24
	fmt.Fprintf(&b, `<svg class="strip" width="%d" height="%d" viewBox="0 0 %d %d" role="img"><title>scores of every valid run</title>`, left+width+20, h, left+width+20, h)
	for i, a := range agents {
		fmt.Fprintf(&b, `<text class="row" x="%d" y="%d">%s</text>`, left-6, rowH*i+13, template.HTMLEscapeString(truncate(a, 22)))
	}
	xs := left + sc.x(v.SOTA)
	fmt.Fprintf(&b, `<line class="sota" x1="%g" y1="0" x2="%g" y2="%d"/><text class="axis" x="%g" y="%d">SOTA %s</text>`, xs, xs, rowH*len(agents), xs, h-4, strconv.FormatFloat(v.SOTA, 'g', 4, 64))
	for _, r := range v.Runs {
		if r.Score == nil || !r.Valid {
			continue
		}
		fmt.Fprintf(&b, `<circle class="run" cx="%g" cy="%d" r="4"><title>%s seed %d: %s</title></circle>`, left+sc.x(*r.Score), rowH*row[r.Agent]+9,
			template.HTMLEscapeString(r.Agent), r.Seed, strconv.FormatFloat(*r.Score, 'g', 6, 64))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// progressSVG is a campaign's slots as one stacked bar: done, running, claimed, failed,
// awaiting a sealed bundle's key, open.
func progressSVG(c Campaign) template.HTML {
	st := c.Status
	total := st.Slots
	if total <= 0 {
		return ""
	}
	const width = 240
	parts := []struct {
		n     int
		class string
	}{{st.Done, "done"}, {st.Running, "running"}, {st.Claimed, "claimed"}, {st.Failed, "failed"}, {st.AwaitingKey, "awaiting-key"}}
	awaiting := ""
	if st.AwaitingKey > 0 {
		awaiting = fmt.Sprintf(", %d awaiting a key", st.AwaitingKey)
	}
	if st.NotHere > 0 {
		awaiting += fmt.Sprintf("; %d more this node never runs", st.NotHere)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="progress" width="%d" height="14" viewBox="0 0 %d 14" role="img"><title>%d of %d slots done, %d running, %d claimed, %d failed%s</title><rect x="0" y="0" width="%d" height="14" class="open"/>`,
		width, width, st.Done, total, st.Running, st.Claimed, st.Failed, awaiting, width)
	x := 0.0
	for _, p := range parts {
		w := float64(p.n) / float64(total) * width
		if w > 0 {
			fmt.Fprintf(&b, `<rect x="%g" y="0" width="%g" height="14" class="%s"/>`, math.Round(x*10)/10, math.Round(w*10)/10, p.class)
		}
		x += w
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
