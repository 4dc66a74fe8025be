//! The fleet plot: lease-renewal lag (p50, p99) and resident memory against node count, as one
//! SVG of two panels with a logarithmic node axis. Written by hand: two line charts do not need
//! a plotting library.

use std::fmt::Write as _;

use serde_json::Value;

/// One fleet run, as `fleet.json` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub nodes: f64,
    pub lag_p50: f64,
    pub lag_p99: f64,
    pub rss_mib: f64,
}

/// The runs of a `fleet.json` (see `bench/results/README.md`), by node count.
pub fn runs(fleet: &Value) -> Result<Vec<Run>, String> {
    let list = fleet["runs"]
        .as_array()
        .ok_or("fleet.json has no \"runs\" list")?;
    let mut runs = list
        .iter()
        .map(|run| {
            let number = |value: &Value, what: &str| {
                value
                    .as_f64()
                    .ok_or_else(|| format!("a run has no number for {what}: {run}"))
            };
            Ok(Run {
                nodes: number(&run["nodes"], "nodes")?,
                lag_p50: number(&run["renewalLagSeconds"]["p50"], "renewalLagSeconds.p50")?,
                lag_p99: number(&run["renewalLagSeconds"]["p99"], "renewalLagSeconds.p99")?,
                rss_mib: number(&run["rssBytes"], "rssBytes")? / f64::from(1 << 20),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    runs.sort_by(|a, b| a.nodes.total_cmp(&b.nodes));
    if runs.is_empty() {
        return Err("fleet.json lists no runs".into());
    }
    Ok(runs)
}

const WIDTH: f64 = 420.0;
const HEIGHT: f64 = 300.0;
const MARGIN: f64 = 55.0;

/// One line of a panel: its name, colour and (nodes, value) points.
struct Series<'a> {
    name: &'a str,
    colour: &'a str,
    points: Vec<(f64, f64)>,
}

struct Panel<'a> {
    left: f64,
    title: &'a str,
    unit: &'a str,
    series: Vec<Series<'a>>,
}

fn panel(svg: &mut String, panel: &Panel<'_>, x_range: (f64, f64)) {
    let y_max = panel
        .series
        .iter()
        .flat_map(|series| series.points.iter().map(|(_, y)| *y))
        .fold(0.0_f64, f64::max)
        .max(f64::MIN_POSITIVE)
        * 1.15;
    let (x0, y0) = (panel.left + MARGIN, HEIGHT - MARGIN);
    let (w, h) = (WIDTH - MARGIN - 15.0, HEIGHT - MARGIN - 35.0);
    let (lo, hi) = (
        x_range.0.log10(),
        x_range.1.log10().max(x_range.0.log10() + 1.0),
    );
    let x = |nodes: f64| x0 + (nodes.log10() - lo) / (hi - lo) * w;
    let y = |value: f64| y0 - value / y_max * h;
    let _ = write!(
        svg,
        r##"<text x="{:.1}" y="20" font-size="14" text-anchor="middle">{}</text><line x1="{x0}" y1="{y0}" x2="{:.1}" y2="{y0}" stroke="#333"/><line x1="{x0}" y1="{y0}" x2="{x0}" y2="{:.1}" stroke="#333"/>"##,
        x0 + w / 2.0,
        panel.title,
        x0 + w,
        y0 - h
    );
    for decade in (lo.floor() as i32)..=(hi.ceil() as i32) {
        let nodes = 10f64.powi(decade);
        if nodes >= x_range.0 * 0.999 && nodes <= x_range.1 * 1.001 {
            let _ = write!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">{nodes}</text>"#,
                x(nodes),
                y0 + 16.0
            );
        }
    }
    for step in 0..=4 {
        let value = y_max / 1.15 * f64::from(step) / 4.0;
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end">{value:.2}</text>"#,
            x0 - 5.0,
            y(value) + 4.0
        );
    }
    let _ = write!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">nodes (log)</text>"#,
        x0 + w / 2.0,
        y0 + 34.0
    );
    let _ = write!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" font-size="11" transform="rotate(-90 {:.1} {:.1})" text-anchor="middle">{}</text>"#,
        panel.left + 14.0,
        y0 - h / 2.0,
        panel.left + 14.0,
        y0 - h / 2.0,
        panel.unit
    );
    for (
        index,
        Series {
            name,
            colour,
            points,
        },
    ) in panel.series.iter().enumerate()
    {
        let path: Vec<String> = points
            .iter()
            .map(|(n, v)| format!("{:.1},{:.1}", x(*n), y(*v)))
            .collect();
        let _ = write!(
            svg,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
        for (n, v) in points {
            let _ = write!(
                svg,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{colour}"/>"#,
                x(*n),
                y(*v)
            );
        }
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" font-size="11" fill="{colour}">{name}</text>"#,
            x0 + 8.0,
            y0 - h + 14.0 * index as f64
        );
    }
}

/// The SVG for `runs`.
pub fn render(runs: &[Run]) -> String {
    let x_range = (runs[0].nodes, runs[runs.len() - 1].nodes);
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{HEIGHT}" font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>"#,
        WIDTH * 2.0
    );
    let lag = Panel {
        left: 0.0,
        title: "Lease renewal lag",
        unit: "seconds",
        series: vec![
            Series {
                name: "p50",
                colour: "#1f77b4",
                points: runs.iter().map(|r| (r.nodes, r.lag_p50)).collect(),
            },
            Series {
                name: "p99",
                colour: "#d62728",
                points: runs.iter().map(|r| (r.nodes, r.lag_p99)).collect(),
            },
        ],
    };
    let memory = Panel {
        left: WIDTH,
        title: "Agent resident memory",
        unit: "MiB",
        series: vec![Series {
            name: "RSS",
            colour: "#2ca02c",
            points: runs.iter().map(|r| (r.nodes, r.rss_mib)).collect(),
        }],
    };
    panel(&mut svg, &lag, x_range);
    panel(&mut svg, &memory, x_range);
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn runs_are_read_sorted_and_drawn() {
        let fleet = json!({"runs": [
            {"nodes": 1000, "rssBytes": 104857600, "renewalLagSeconds": {"p50": 0.02, "p99": 0.3}},
            {"nodes": 100, "rssBytes": 20971520, "renewalLagSeconds": {"p50": 0.01, "p99": 0.05}},
        ]});
        let runs = runs(&fleet).expect("valid");
        assert_eq!(runs[0].nodes, 100.0);
        assert_eq!(runs[1].rss_mib, 100.0);
        let svg = render(&runs);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<polyline").count(), 3);
        assert!(svg.contains(">1000<"), "the node axis is labelled");
    }

    #[test]
    fn a_malformed_file_says_what_is_missing() {
        let error = runs(&json!({"runs": [{"nodes": 10}]})).unwrap_err();
        assert!(error.contains("renewalLagSeconds.p50"), "{error}");
        assert!(runs(&json!({})).unwrap_err().contains("runs"));
    }
}
