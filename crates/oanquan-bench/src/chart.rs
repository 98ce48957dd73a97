//! The SVG chart: throughput and p99 latency against concurrency, the service beside the echo
//! baseline, drawn from the points of one run.

use std::path::Path;

use anyhow::anyhow;
use plotters::prelude::*;

use crate::report::Point;

/// Colour of a target's line.
fn colour(target: &str) -> RGBColor {
    match target {
        "echo" => RGBColor(120, 120, 120),
        "memory" => RGBColor(31, 119, 180),
        "durable" => RGBColor(214, 39, 40),
        "pg×1" => RGBColor(148, 103, 189),
        "pg×2" => RGBColor(255, 127, 14),
        "pg×3" => RGBColor(140, 86, 75),
        _ => RGBColor(44, 160, 44),
    }
}

/// Draws throughput (left) and p99 latency (right) against concurrency, one line per target,
/// into an SVG file at `path`. `title` goes above both panels.
///
/// # Errors
///
/// If there is nothing to draw or the file cannot be written.
pub fn throughput_chart(path: &Path, title: &str, points: &[Point]) -> anyhow::Result<()> {
    let mut targets: Vec<&str> = Vec::new();
    for point in points {
        if !targets.contains(&point.target.as_str()) {
            targets.push(&point.target);
        }
    }
    if points.is_empty() {
        return Err(anyhow!("no points to draw"));
    }
    let max_conc = points
        .iter()
        .map(|p| p.concurrency)
        .max()
        .unwrap_or(1)
        .max(2) as f64;
    let max_ops = points.iter().map(|p| p.ops_per_s).fold(1.0, f64::max) * 1.1;
    let max_p99 = points.iter().map(|p| p.latency_ms.p99).fold(0.1, f64::max) * 1.3;
    let min_p99 = points
        .iter()
        .map(|p| p.latency_ms.p99)
        .filter(|&v| v > 0.0)
        .fold(f64::MAX, f64::min)
        .min(max_p99 / 2.0)
        * 0.7;

    let root = SVGBackend::new(path, (1100, 460)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let root = root
        .titled(title, ("sans-serif", 18))
        .map_err(|e| anyhow!("{e}"))?;
    let (left, right) = root.split_horizontally(550);

    let mut throughput = ChartBuilder::on(&left)
        .caption(
            "throughput (calls/s; moves/s for the server)",
            ("sans-serif", 15),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((1.0..max_conc * 1.3).log_scale(), 0.0..max_ops)
        .map_err(|e| anyhow!("{e}"))?;
    throughput
        .configure_mesh()
        .x_desc("concurrent games / callers (log scale)")
        .y_desc("calls per second")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
        .map_err(|e| anyhow!("{e}"))?;

    let mut latency = ChartBuilder::on(&right)
        .caption("p99 call latency (ms, log scale)", ("sans-serif", 15))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(
            (1.0..max_conc * 1.3).log_scale(),
            (min_p99..max_p99).log_scale(),
        )
        .map_err(|e| anyhow!("{e}"))?;
    latency
        .configure_mesh()
        .x_desc("concurrent games / callers (log scale)")
        .y_desc("p99 ms")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.2}"))
        .draw()
        .map_err(|e| anyhow!("{e}"))?;

    for target in &targets {
        let colour = colour(target);
        let mut series: Vec<&Point> = points.iter().filter(|p| p.target == *target).collect();
        series.sort_by_key(|p| p.concurrency);
        let ops: Vec<(f64, f64)> = series
            .iter()
            .map(|p| (p.concurrency as f64, p.ops_per_s))
            .collect();
        let p99: Vec<(f64, f64)> = series
            .iter()
            .map(|p| (p.concurrency as f64, p.latency_ms.p99.max(min_p99)))
            .collect();
        throughput
            .draw_series(LineSeries::new(ops.clone(), colour.stroke_width(2)))
            .map_err(|e| anyhow!("{e}"))?
            .label(*target)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
        throughput
            .draw_series(ops.iter().map(|&xy| Circle::new(xy, 3, colour.filled())))
            .map_err(|e| anyhow!("{e}"))?;
        latency
            .draw_series(LineSeries::new(p99.clone(), colour.stroke_width(2)))
            .map_err(|e| anyhow!("{e}"))?
            .label(*target)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
        latency
            .draw_series(p99.iter().map(|&xy| Circle::new(xy, 3, colour.filled())))
            .map_err(|e| anyhow!("{e}"))?;
    }
    throughput
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    latency
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}
