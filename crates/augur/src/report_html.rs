//! `report.html`: one self-contained page per `augur bench` run — the summary table, throughput
//! over time, latency distributions, aborts by reason and throughput ratios, drawn as inline SVG
//! so the page needs no network, script or external file.

use crate::report::ProtocolResult;
use std::fmt::Write;

/// Colours for the series, in protocol order (distinguishable, and legible in greyscale order).
const PALETTE: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
];

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 300.0;
const MARGIN_LEFT: f64 = 64.0;
const MARGIN_RIGHT: f64 = 150.0;
const MARGIN_TOP: f64 = 30.0;
const MARGIN_BOTTOM: f64 = 44.0;

/// Render the report for `results`; `config` is the run's configuration as JSON (echoed).
pub fn render(config: &serde_json::Value, results: &[ProtocolResult]) -> String {
    let mut html = String::new();
    let workload = config["workload"].as_str().unwrap_or("?");
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>augur bench: {w}</title><style>{css}</style></head><body>\
         <h1>augur bench — {w}</h1>",
        w = escape(workload),
        css = CSS
    );
    if config["runtime"].as_str() == Some("sim") {
        html += "<p><b>Modelled, not measured:</b> this run was simulated in virtual time with a \
                 CPU model (<code>--runtime sim</code>; the model and its costs are in the \
                 configuration below).</p>";
    }
    html += &summary_table(results);
    html += "<div class=\"charts\">";
    html += &throughput_over_time(results);
    html += &latency_cdf(results);
    html += &aborts_by_reason(results);
    html += &ratios(results);
    html += "</div>";
    html += &per_type_table(results);
    let _ = writeln!(
        html,
        "<h2>Configuration</h2><pre>{}</pre></body></html>",
        escape(&serde_json::to_string_pretty(config).unwrap_or_default())
    );
    html
}

pub(crate) const CSS: &str = "body{font-family:system-ui,sans-serif;margin:24px;color:#222}\
    table{border-collapse:collapse;margin:8px 0 24px}\
    th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}\
    th:first-child,td:first-child{text-align:left}\
    .charts{display:flex;flex-wrap:wrap;gap:16px}\
    .pass{color:#2ca02c}.fail{color:#d62728;font-weight:bold}\
    pre{background:#f6f6f6;padding:8px;font-size:12px;max-width:1000px;overflow:auto}\
    svg text{font-size:12px;font-family:system-ui,sans-serif}";

pub(crate) fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

fn summary_table(results: &[ProtocolResult]) -> String {
    let mut t = String::from(
        "<h2>Summary</h2><table><tr><th>protocol</th><th>isolation</th><th>throughput tps</th>\
         <th>goodput tps</th><th>abort rate</th><th>p50 ms</th><th>p99 ms</th><th>ratio</th>\
         <th>checks</th></tr>",
    );
    for r in results {
        let checks = match &r.checks {
            None => "—".to_string(),
            Some(cs) => cs
                .iter()
                .map(|c| {
                    format!(
                        "<span class=\"{}\" title=\"{}\">{}</span>",
                        if c.passed { "pass" } else { "fail" },
                        escape(&c.detail),
                        escape(&c.name)
                    )
                })
                .collect::<Vec<_>>()
                .join(" "),
        };
        let _ = write!(
            t,
            "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}%</td><td>{:.2}</td>\
             <td>{:.2}</td><td>{:.3}</td><td>{}</td></tr>",
            escape(&r.protocol),
            r.isolation,
            r.throughput_tps,
            r.goodput_tps,
            r.abort_rate * 100.0,
            r.latency_ms.p50,
            r.latency_ms.p99,
            r.throughput_ratio,
            checks
        );
    }
    t + "</table>"
}

fn per_type_table(results: &[ProtocolResult]) -> String {
    let mut t = String::from(
        "<h2>Per transaction type</h2><table><tr><th>protocol</th><th>type</th>\
         <th>committed</th><th>aborted</th><th>user rollbacks</th><th>unknown</th>\
         <th>retries</th><th>p50 ms</th><th>p99 ms</th></tr>",
    );
    for r in results {
        for (name, c) in &r.per_type {
            let lat = r.per_type_latency_ms.get(name);
            let _ = write!(
                t,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                 <td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&r.protocol),
                escape(name),
                c.committed,
                c.aborted,
                c.user_rollbacks,
                c.unknown,
                c.retries,
                lat.map_or("—".into(), |l| format!("{:.2}", l.p50)),
                lat.map_or("—".into(), |l| format!("{:.2}", l.p99)),
            );
        }
    }
    t + "</table>"
}

/// A series of points for a line chart.
pub(crate) struct Series<'a> {
    pub name: &'a str,
    pub points: Vec<(f64, f64)>,
}

/// Axis ticks: about five round values covering `0..=max`.
fn ticks(max: f64) -> Vec<f64> {
    if max <= 0.0 {
        return vec![0.0];
    }
    let raw = max / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(raw);
    (0..)
        .map(|i| i as f64 * step)
        .take_while(|v| *v <= max * 1.0001)
        .collect()
}

fn format_tick(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// A line chart with linear axes from zero; `shade_until` greys the x range before it (the
/// warm-up).
pub(crate) fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    shade_until: Option<f64>,
) -> String {
    let x_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(0.0, f64::max)
        .max(1e-9);
    let y_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.05;
    let plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT;
    let plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM;
    let x = |v: f64| MARGIN_LEFT + v / x_max * plot_w;
    let y = |v: f64| MARGIN_TOP + plot_h - v / y_max * plot_h;
    let mut svg = open_svg(title, series.iter().map(|s| s.name), HEIGHT);
    if let Some(until) = shade_until.filter(|u| *u > 0.0) {
        let _ = write!(
            svg,
            "<rect x=\"{:.1}\" y=\"{MARGIN_TOP}\" width=\"{:.1}\" height=\"{plot_h}\" \
             fill=\"#eee\"/><text x=\"{:.1}\" y=\"{:.1}\" fill=\"#888\">warm-up</text>",
            x(0.0),
            x(until.min(x_max)) - x(0.0),
            x(0.0) + 4.0,
            MARGIN_TOP + 14.0
        );
    }
    svg += &axes(x_label, y_label, &ticks(x_max), &ticks(y_max), &x, &y);
    for (i, s) in series.iter().enumerate() {
        let path: Vec<String> = s
            .points
            .iter()
            .map(|(px, py)| format!("{:.1},{:.1}", x(*px), y(*py)))
            .collect();
        let _ = write!(
            svg,
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>",
            colour(i),
            path.join(" ")
        );
        // Few points get a mark each: a line through one point draws nothing.
        if s.points.len() <= MARKED_POINTS {
            for (px, py) in &s.points {
                let _ = write!(
                    svg,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{}\"/>",
                    x(*px),
                    y(*py),
                    colour(i)
                );
            }
        }
    }
    svg += &legend(series.iter().map(|s| s.name));
    svg + "</svg>"
}

/// Series with at most this many points get a mark at each (a sweep's points, not a time
/// series' seconds).
const MARKED_POINTS: usize = 24;

/// The width a legend of `names` needs right of the plot, in pixels (an estimate of the text's
/// width: the charts' font is the page's sans-serif at its default size).
fn legend_width<'a>(names: impl Iterator<Item = &'a str>) -> f64 {
    let longest = names.map(|n| n.chars().count()).max().unwrap_or(0);
    30.0 + 7.5 * longest as f64
}

/// An `<svg>` for a chart titled `title` whose legend lists `names`: wider than [`WIDTH`]
/// when the names need more room than [`MARGIN_RIGHT`], so that none is cut.
fn open_svg<'a>(title: &str, names: impl Iterator<Item = &'a str>, height: f64) -> String {
    let width = WIDTH + (legend_width(names) - MARGIN_RIGHT).max(0.0);
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         role=\"img\" aria-label=\"{t}\"><text x=\"{MARGIN_LEFT}\" y=\"18\" \
         font-weight=\"bold\">{t}</text>",
        t = escape(title)
    )
}

fn axes(
    x_label: &str,
    y_label: &str,
    x_ticks: &[f64],
    y_ticks: &[f64],
    x: &dyn Fn(f64) -> f64,
    y: &dyn Fn(f64) -> f64,
) -> String {
    let bottom = HEIGHT - MARGIN_BOTTOM;
    let right = WIDTH - MARGIN_RIGHT;
    let mut svg = format!(
        "<line x1=\"{MARGIN_LEFT}\" y1=\"{bottom}\" x2=\"{right}\" y2=\"{bottom}\" stroke=\"#444\"/>\
         <line x1=\"{MARGIN_LEFT}\" y1=\"{MARGIN_TOP}\" x2=\"{MARGIN_LEFT}\" y2=\"{bottom}\" stroke=\"#444\"/>"
    );
    for &t in x_ticks {
        let _ = write!(
            svg,
            "<line x1=\"{px:.1}\" y1=\"{bottom}\" x2=\"{px:.1}\" y2=\"{:.1}\" stroke=\"#444\"/>\
             <text x=\"{px:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            bottom + 4.0,
            bottom + 16.0,
            format_tick(t),
            px = x(t)
        );
    }
    for &t in y_ticks {
        let _ = write!(
            svg,
            "<line x1=\"{MARGIN_LEFT}\" y1=\"{py:.1}\" x2=\"{right}\" y2=\"{py:.1}\" stroke=\"#eee\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            MARGIN_LEFT - 6.0,
            y(t) + 4.0,
            format_tick(t),
            py = y(t)
        );
    }
    let _ = write!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\
         <text transform=\"translate(14,{:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        (MARGIN_LEFT + right) / 2.0,
        HEIGHT - 8.0,
        escape(x_label),
        (MARGIN_TOP + bottom) / 2.0,
        escape(y_label)
    );
    svg
}

fn legend<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let mut svg = String::new();
    for (i, name) in names.enumerate() {
        let ly = MARGIN_TOP + 10.0 + i as f64 * 18.0;
        let lx = WIDTH - MARGIN_RIGHT + 12.0;
        let _ = write!(
            svg,
            "<rect x=\"{lx}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{}\"/>\
             <text x=\"{:.1}\" y=\"{ly:.1}\" dy=\"4\">{}</text>",
            ly - 6.0,
            colour(i),
            lx + 18.0,
            escape(name)
        );
    }
    svg
}

fn throughput_over_time(results: &[ProtocolResult]) -> String {
    let warmup = results
        .first()
        .map(|r| r.samples.iter().filter(|s| s.warmup).count() as f64);
    let series: Vec<Series> = results
        .iter()
        .map(|r| Series {
            name: &r.protocol,
            // Plotted at the end of each second: what completed during it.
            points: r
                .samples
                .iter()
                .map(|s| ((s.second + 1) as f64, s.committed as f64))
                .collect(),
        })
        .collect();
    line_chart(
        "Committed transactions per second",
        "seconds since start",
        "transactions / s",
        &series,
        warmup,
    )
}

fn latency_cdf(results: &[ProtocolResult]) -> String {
    let series: Vec<Series> = results
        .iter()
        .map(|r| Series {
            name: &r.protocol,
            // Up to the 99.9th percentile: a single slow outlier would squash the curve.
            points: r
                .latency_cdf_ms
                .iter()
                .filter(|(q, _)| *q <= 0.999)
                .map(|(q, ms)| (*ms, *q))
                .collect(),
        })
        .collect();
    line_chart(
        "Commit latency distribution, to p99.9 (measured window)",
        "latency (ms)",
        "fraction of transactions",
        &series,
        None,
    )
}

/// Horizontal grouped bars: one group per category, one bar per protocol.
pub(crate) fn bar_chart(
    title: &str,
    unit: &str,
    categories: &[String],
    values: &[Vec<f64>],
    names: &[&str],
) -> String {
    let max = values
        .iter()
        .flatten()
        .copied()
        .fold(0.0, f64::max)
        .max(1e-9);
    let groups = categories.len().max(1);
    let per_group = names.len().max(1);
    // The chart grows with its bars rather than leaving a fixed plot area half empty.
    let bar_h = 18.0;
    let height = MARGIN_TOP + (groups * per_group) as f64 * bar_h + MARGIN_BOTTOM;
    let label_w = 150.0;
    // Room on the right for the value printed after the longest bar.
    let plot_w = WIDTH - label_w - MARGIN_RIGHT - 40.0;
    // Room for the legend's rows too.
    let height = height.max(MARGIN_TOP + 10.0 + names.len() as f64 * 18.0 + MARGIN_BOTTOM);
    let mut svg = open_svg(title, names.iter().copied(), height);
    for (g, cat) in categories.iter().enumerate() {
        let gy = MARGIN_TOP + g as f64 * bar_h * per_group as f64;
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            label_w - 6.0,
            gy + bar_h * per_group as f64 / 2.0 + 4.0,
            escape(cat)
        );
        for (p, v) in values
            .iter()
            .map(|vs| vs.get(g).copied().unwrap_or(0.0))
            .enumerate()
        {
            let w = v / max * plot_w;
            let by = gy + p as f64 * bar_h;
            let _ = write!(
                svg,
                "<rect x=\"{label_w}\" y=\"{by:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"{}\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                bar_h - 2.0,
                colour(p),
                label_w + w + 4.0,
                by + bar_h - 5.0,
                format_tick(v)
            );
        }
    }
    let _ = write!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
        label_w + plot_w / 2.0,
        height - 8.0,
        escape(unit)
    );
    svg += &legend(names.iter().copied());
    svg + "</svg>"
}

fn aborts_by_reason(results: &[ProtocolResult]) -> String {
    let mut reasons: Vec<String> = results
        .iter()
        .flat_map(|r| r.aborts_by_reason.keys().map(|k| k.to_string()))
        .collect();
    reasons.sort();
    reasons.dedup();
    if reasons.is_empty() {
        reasons.push("(no aborts)".into());
    }
    let values: Vec<Vec<f64>> = results
        .iter()
        .map(|r| {
            reasons
                .iter()
                .map(|k| r.aborts_by_reason.get(k.as_str()).copied().unwrap_or(0) as f64)
                .collect()
        })
        .collect();
    let names: Vec<&str> = results.iter().map(|r| r.protocol.as_str()).collect();
    bar_chart(
        "Aborted attempts by reason",
        "aborted attempts",
        &reasons,
        &values,
        &names,
    )
}

fn ratios(results: &[ProtocolResult]) -> String {
    let base = results.first().map_or("", |r| r.protocol.as_str());
    let categories = vec![format!("throughput / {base}")];
    let values: Vec<Vec<f64>> = results.iter().map(|r| vec![r.throughput_ratio]).collect();
    let names: Vec<&str> = results.iter().map(|r| r.protocol.as_str()).collect();
    bar_chart("Throughput ratio", "ratio", &categories, &values, &names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(10.0), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.0), vec![0.0]);
        let t = ticks(17_300.0);
        assert!(t.len() >= 4 && *t.last().unwrap() <= 17_300.0 * 1.0001);
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape("<a&\"b\">"), "&lt;a&amp;&quot;b&quot;&gt;");
    }

    #[test]
    fn a_one_point_series_is_drawn_and_long_names_widen_the_chart() {
        let one = [Series {
            name: "clocksi-rep:txn_form=one-shot,log=always",
            points: vec![(4.0, 1000.0)],
        }];
        let svg = line_chart("t", "x", "y", &one, None);
        assert!(svg.contains("<circle"), "{svg}");
        let width = |svg: &str| -> f64 {
            let at = svg.find("width=\"").unwrap() + 7;
            svg[at..].split('"').next().unwrap().parse().unwrap()
        };
        assert!(width(&svg) > WIDTH, "{svg}");
        let short = [Series {
            name: "nocc",
            points: vec![(1.0, 1.0), (2.0, 2.0)],
        }];
        assert_eq!(width(&line_chart("t", "x", "y", &short, None)), WIDTH);
    }
}
