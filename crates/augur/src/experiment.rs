//! `augur bench --config FILE`: an experiment file describes one figure or table of a paper — the
//! setting it reports, its headline figure, and the benchmark runs that reproduce it — and this
//! module runs them all, one `augur bench` run per entry (and per sweep point), then writes an
//! experiment summary and a report comparing the runs. The format is in `experiments/README.md`.
//!
//! A name the file gives that is no protocol, peer or workload of augur's is an error. The
//! PostgreSQL peers are skipped with a message when no server answers; a run left with no
//! protocol is skipped entirely.

use crate::BadInput;
use crate::bench_options::{BenchArgs, BenchConfig, Runtime};
use crate::report_html::{CSS, Series, bar_chart, escape, line_chart};
use augur_protocols::registry;
use augur_workloads::SmokeSetting;
use clap::Parser;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::path::Path;
#[cfg(test)]
use std::path::PathBuf;

/// An experiment file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    /// Short name; results go to `OUT/NAME/`. Defaults to the file's stem.
    pub name: Option<String>,
    pub paper: String,
    pub figure: String,
    /// The paper's setting, in words (cluster, workload, parameters).
    pub setting: String,
    /// The paper's headline figure for this experiment, to compare against.
    pub headline: String,
    /// How augur's setting differs from the paper's, if it does.
    #[serde(default)]
    pub deviations: Vec<String>,
    /// `augur bench` options shared by every run (`protocol`, `workload`, `nodes`, `set`, ...).
    #[serde(default)]
    pub bench: toml::Table,
    /// The runs; each may override any option. Without runs, one run of `bench` alone.
    #[serde(default)]
    pub run: Vec<RunSpec>,
    /// Vary one option across values within every run (throughput against clients, say).
    pub sweep: Option<Sweep>,
}

#[derive(Debug, Deserialize)]
pub struct RunSpec {
    pub name: String,
    #[serde(flatten)]
    pub options: toml::Table,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    /// An `augur bench` option, e.g. `clients`.
    pub option: String,
    pub values: Vec<toml::Value>,
}

/// One protocol's result at one point of the experiment.
#[derive(Debug, Serialize)]
struct Point {
    run: String,
    sweep_value: Option<String>,
    protocol: String,
    throughput_tps: f64,
    goodput_tps: f64,
    abort_rate: f64,
    p50_ms: f64,
    p99_ms: f64,
    throughput_ratio: f64,
    checks_passed: Option<bool>,
    /// Whether the point is modelled (`--runtime sim`: virtual time, a CPU model) rather than
    /// measured.
    modelled: bool,
    /// With speculation: the perceived latency's median, the misspeculation rate, and the
    /// degree the clients ended with.
    #[serde(skip_serializing_if = "Option::is_none")]
    perceived_p50_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    misspeculation_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    final_degree: Option<String>,
    /// For SSS: the share of update latency spent in the snapshot-queue (Fig. 5), and the
    /// mean update latency to external commit.
    #[serde(skip_serializing_if = "Option::is_none")]
    snapshot_queue_share: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mean_update_latency_ms: Option<f64>,
    /// For SSS: the share from the decision (internal commit) to external commit, which is
    /// what the paper's Fig. 5 bar shows (the hold plus the messages around it).
    #[serde(skip_serializing_if = "Option::is_none")]
    after_decision_share: Option<f64>,
}

#[derive(Serialize)]
struct Summary<'a> {
    name: &'a str,
    paper: &'a str,
    figure: &'a str,
    setting: &'a str,
    headline: &'a str,
    deviations: &'a [String],
    smoke: bool,
    points: &'a [Point],
    skipped: &'a [String],
}

#[derive(Parser)]
#[command(no_binary_name = true)]
struct BenchOnly {
    #[command(flatten)]
    args: BenchArgs,
}

fn bad(msg: impl Into<String>) -> anyhow::Error {
    BadInput(msg.into()).into()
}

/// Load and check an experiment file.
pub fn load(path: &Path) -> anyhow::Result<Experiment> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| bad(format!("cannot read {}: {e}", path.display())))?;
    toml::from_str(&text).map_err(|e| bad(format!("{}: {e}", path.display())))
}

/// The command line for `options`, as `augur bench` would take it.
fn argv(options: &toml::Table) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for (key, value) in options {
        let flag = format!("--{}", key.replace('_', "-"));
        match value {
            toml::Value::Boolean(true) => out.push(flag),
            toml::Value::Boolean(false) => {}
            toml::Value::Array(items) if key == "set" => {
                for item in items {
                    out.push(flag.clone());
                    out.push(scalar(item).ok_or(format!("'{key}' takes strings"))?);
                }
            }
            toml::Value::Array(items) => {
                let parts: Option<Vec<String>> = items.iter().map(scalar).collect();
                out.push(flag);
                out.push(
                    parts
                        .ok_or(format!("'{key}' takes a list of values"))?
                        .join(","),
                );
            }
            other => {
                out.push(flag);
                out.push(scalar(other).ok_or(format!("'{key}' takes a value"))?);
            }
        }
    }
    Ok(out)
}

fn scalar(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A run's protocol entries, each naming a registered protocol or a peer; an unknown name is an
/// error.
fn known(protocols: &toml::Value) -> anyhow::Result<Vec<toml::Value>> {
    let names: Vec<String> = match protocols {
        toml::Value::Array(items) => items.iter().filter_map(scalar).collect(),
        other => scalar(other)
            .map(|s| s.split(',').map(str::to_string).collect())
            .unwrap_or_default(),
    };
    let mut keep = Vec::new();
    for entry in names {
        // An entry may carry settings after its name (`str:speculation=reads`).
        let name = entry.split(':').next().unwrap_or_default().to_string();
        if let (Err(e), None) = (registry::info(&name), crate::peers::peer(&name)) {
            return Err(bad(e.to_string()));
        }
        keep.push(toml::Value::String(entry));
    }
    Ok(keep)
}

/// Which part of an experiment to run.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// A quick pass: 1 s per protocol (longer on a WAN), the first two sweep values, each
    /// protocol entry run at its first point only (the others validated).
    pub smoke: bool,
    /// Only the runs with these names (all when empty).
    pub runs: Vec<String>,
    /// These sweep values instead of the file's (the file's when empty).
    pub sweep_values: Vec<String>,
    /// This runtime instead of the file's (`--runtime`), e.g. `sim` to model the experiment in
    /// virtual time.
    pub runtime: Option<Runtime>,
    /// Measured seconds per protocol instead of the file's (`--duration`): a modelled run
    /// (`--runtime sim`) is deterministic, so it has no run-to-run noise to average away.
    pub duration: Option<f64>,
    /// Warm-up seconds per protocol instead of the file's (`--warmup`).
    pub warmup: Option<f64>,
    /// `sim.KEY=VALUE` settings of the CPU model, added to every run's.
    pub sim_settings: Vec<String>,
}

/// Run the experiment in `path` (the part `selection` picks), writing under `out/NAME/`.
/// `run_config` runs one point's benchmark (the binary's `bench::run_config`).
pub fn run(
    path: &Path,
    out: &Path,
    selection: &Selection,
    run_config: &dyn Fn(&BenchConfig) -> anyhow::Result<crate::report::Finished>,
) -> anyhow::Result<()> {
    let smoke = selection.smoke;
    let mut exp = load(path)?;
    if !selection.runs.is_empty() {
        for wanted in &selection.runs {
            if !exp.run.iter().any(|r| r.name == *wanted) {
                let names: Vec<&str> = exp.run.iter().map(|r| r.name.as_str()).collect();
                return Err(bad(format!(
                    "{}: no run named '{wanted}'; its runs: {}",
                    path.display(),
                    names.join(", ")
                )));
            }
        }
        exp.run.retain(|r| selection.runs.contains(&r.name));
    }
    if !selection.sweep_values.is_empty() {
        let Some(sweep) = &mut exp.sweep else {
            return Err(bad(format!(
                "{}: --sweep-values given, but the experiment has no [sweep]",
                path.display()
            )));
        };
        // Numbers stay numbers, so the option sees the same type as from the file.
        sweep.values = selection
            .sweep_values
            .iter()
            .map(|v| match v.parse::<i64>() {
                Ok(i) => toml::Value::Integer(i),
                Err(_) => match v.parse::<f64>() {
                    Ok(f) => toml::Value::Float(f),
                    Err(_) => toml::Value::String(v.clone()),
                },
            })
            .collect();
    }
    let name = exp.name.clone().unwrap_or_else(|| {
        path.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "experiment".into())
    });
    let dir = out.join(&name);
    println!("{name}: {} {} — {}", exp.paper, exp.figure, exp.setting);
    println!("paper: {}", exp.headline);
    let runs: Vec<RunSpec> = if exp.run.is_empty() {
        vec![RunSpec {
            name: "run".into(),
            options: toml::Table::new(),
        }]
    } else {
        exp.run
    };
    let sweep_values: Vec<Option<toml::Value>> = match &exp.sweep {
        None => vec![None],
        Some(s) => {
            let n = if smoke { 2 } else { s.values.len() };
            s.values.iter().take(n).cloned().map(Some).collect()
        }
    };
    let mut points = Vec::new();
    let mut skipped = Vec::new();
    let mut failed_checks = Vec::new();
    // Smoke runs of a protocol that committed nothing (see below).
    let mut idle = Vec::new();
    // A smoke pass runs each protocol entry once per workload, at its first point; the other
    // points are validated (options, protocol and workload settings) but not run, which keeps
    // files with many runs of large clusters affordable.
    let mut smoked: BTreeSet<(String, String)> = BTreeSet::new();
    for spec in &runs {
        for value in &sweep_values {
            let mut options = exp.bench.clone();
            for (k, v) in &spec.options {
                options.insert(k.clone(), v.clone());
            }
            let mut label = spec.name.clone();
            if let (Some(sweep), Some(v)) = (&exp.sweep, value) {
                options.insert(sweep.option.clone(), v.clone());
                label = format!("{label}-{}{}", sweep.option, scalar(v).unwrap_or_default());
            }
            let protocols = options.get("protocol").cloned().ok_or_else(|| {
                bad(format!(
                    "{}: run '{}' names no protocol",
                    path.display(),
                    spec.name
                ))
            })?;
            let mut keep = known(&protocols)?;
            let mut skip = Vec::new();
            let pg_url = options
                .get("pg_url")
                .and_then(scalar)
                .unwrap_or_else(|| augur_postgres::DEFAULT_URL.to_string());
            if keep
                .iter()
                .any(|p| scalar(p).is_some_and(|n| crate::peers::peer(&n).is_some()))
                && let Err(why) = crate::peers::reachable(&pg_url)
            {
                keep.retain(|p| scalar(p).is_none_or(|n| crate::peers::peer(&n).is_none()));
                skip.push(format!(
                    "the PostgreSQL peers: no server at '{pg_url}' ({why}); start one with scripts/postgres.sh start"
                ));
            }
            for s in &skip {
                println!("{label}: skipping {s}");
                skipped.push(format!("{label}: {s}"));
            }
            if keep.is_empty() {
                println!("{label}: skipped, no implemented protocol");
                continue;
            }
            options.insert("protocol".into(), toml::Value::Array(keep));
            if let Some(seconds) = selection.duration {
                options.insert("duration".into(), toml::Value::Float(seconds));
            }
            if let Some(seconds) = selection.warmup {
                options.insert("warmup".into(), toml::Value::Float(seconds));
            }
            if smoke {
                let (duration, warmup) = smoke_window(&options);
                options.insert("duration".into(), toml::Value::Float(duration));
                options.insert("warmup".into(), toml::Value::Float(warmup));
            }
            options.insert(
                "out".into(),
                toml::Value::String(dir.join(&label).to_string_lossy().into_owned()),
            );
            let args = argv(&options)
                .map_err(|e| bad(format!("{}: run '{}': {e}", path.display(), spec.name)))?;
            let parsed = BenchOnly::try_parse_from(&args).map_err(|e| {
                bad(format!(
                    "{}: run '{}': {}",
                    path.display(),
                    spec.name,
                    e.to_string().lines().next().unwrap_or_default()
                ))
            })?;
            let mut args = parsed.args;
            if selection.runtime.is_some() {
                args.runtime = selection.runtime;
            }
            args.set.extend(selection.sim_settings.iter().cloned());
            let mut shrunk = Vec::new();
            if smoke {
                // A smoke run checks that the file runs: it loads no more than that needs.
                let given: BTreeMap<String, String> = args
                    .set
                    .iter()
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                let smaller_settings =
                    augur_workloads::smoke_settings(&args.workload, &given, args.nodes);
                for SmokeSetting {
                    key,
                    asked,
                    smaller,
                } in smaller_settings
                {
                    shrunk.push(format!("{key}={smaller} (the file asks for {asked})"));
                    args.set.push(format!("{key}={smaller}"));
                }
            }
            let mut config = args.validate()?;
            if smoke {
                let workload = &config.workload;
                config
                    .protocols
                    .retain(|p| smoked.insert((p.label.clone(), workload.clone())));
                if config.protocols.is_empty() {
                    println!(
                        "== {label}: valid; not run (smoke: its protocols ran at an earlier point)"
                    );
                    continue;
                }
            }
            println!("== {label}");
            for s in &shrunk {
                println!("smoke: {s}");
            }
            let finished = run_config(&config)?;
            if smoke {
                // A smoke run that commits nothing for a protocol has not shown the file
                // runs: its exit status alone would hide a protocol that loads and then
                // aborts everything.
                idle.extend(
                    finished
                        .results
                        .iter()
                        .filter(|r| r.committed == 0)
                        .map(|r| format!("{label}: {} committed nothing", r.protocol)),
                );
            }
            failed_checks.extend(
                finished
                    .failed_checks
                    .iter()
                    .map(|c| format!("{label}: {c}")),
            );
            for r in &finished.results {
                points.push(Point {
                    run: spec.name.clone(),
                    sweep_value: value.as_ref().and_then(scalar),
                    protocol: r.protocol.to_string(),
                    throughput_tps: r.throughput_tps,
                    goodput_tps: r.goodput_tps,
                    abort_rate: r.abort_rate,
                    p50_ms: r.latency_ms.p50,
                    modelled: config.runtime == Runtime::Sim,
                    p99_ms: r.latency_ms.p99,
                    throughput_ratio: r.throughput_ratio,
                    checks_passed: r.checks.as_ref().map(|cs| cs.iter().all(|c| c.passed)),
                    perceived_p50_ms: r
                        .speculation_stats
                        .as_ref()
                        .map(|s| s.perceived_latency_ms.p50),
                    misspeculation_rate: r
                        .speculation_stats
                        .as_ref()
                        .map(|s| s.misspeculation_rate),
                    final_degree: r
                        .speculation_stats
                        .as_ref()
                        .and_then(|s| s.degree_timeline.last().map(|(_, d)| d.clone())),
                    snapshot_queue_share: r.update_split.as_ref().map(|u| u.snapshot_queue_share),
                    mean_update_latency_ms: r.update_split.as_ref().map(|u| u.mean_latency_ms),
                    after_decision_share: r
                        .update_split
                        .as_ref()
                        .and_then(|u| u.after_decision_share),
                });
            }
        }
    }
    std::fs::create_dir_all(&dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    let summary = Summary {
        name: &name,
        paper: &exp.paper,
        figure: &exp.figure,
        setting: &exp.setting,
        headline: &exp.headline,
        deviations: &exp.deviations,
        smoke,
        points: &points,
        skipped: &skipped,
    };
    std::fs::write(
        dir.join("experiment.json"),
        serde_json::to_string_pretty(&summary)?,
    )?;
    std::fs::write(
        dir.join("experiment.html"),
        render(&summary, exp.sweep.as_ref().map(|s| s.option.as_str())),
    )?;
    println!(
        "wrote experiment.json and experiment.html in {}",
        dir.display()
    );
    if !failed_checks.is_empty() {
        return Err(anyhow::anyhow!(
            "consistency check failed: {}",
            failed_checks.join(", ")
        ));
    }
    if !idle.is_empty() {
        return Err(anyhow::anyhow!(
            "smoke run: {} (a smoke run must commit something)",
            idle.join(", ")
        ));
    }
    Ok(())
}

/// A smoke run's measured seconds and warm-up: one second after 0.2 s on a LAN, longer on a
/// WAN, where a transaction that reads a few remote keys and commits over replicas in other
/// regions takes several round trips, and the configuration group's first election as many
/// (on `ec2-9dc`: 3.1 s after 1 s), so that every protocol has the time to commit something.
fn smoke_window(options: &toml::map::Map<String, toml::Value>) -> (f64, f64) {
    let round_trip = options
        .get("latency")
        .and_then(|v| v.as_str())
        .and_then(|name| augur_types::LatencyProfile::named(name).ok())
        .map_or(0.0, |profile| profile.longest_round_trip().as_secs_f64());
    ((12.0 * round_trip).max(1.0), (4.0 * round_trip).max(0.2))
}

/// The experiment's page: its setting and headline, then throughput against the swept option
/// (or per run), per protocol.
fn render(s: &Summary, sweep: Option<&str>) -> String {
    let mut html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{n}</title>\
         <style>{CSS}</style></head><body><h1>{n}: {p} {f}</h1><p><b>Setting:</b> {set}</p>\
         <p><b>Paper:</b> {h}</p>",
        n = escape(s.name),
        p = escape(s.paper),
        f = escape(s.figure),
        set = escape(s.setting),
        h = escape(s.headline)
    );
    if s.smoke {
        html += "<p><b>Smoke run:</b> 1 s per protocol (longer on a WAN); not a measurement.</p>";
    }
    let modelled = s.points.iter().filter(|p| p.modelled).count();
    if modelled > 0 {
        let _ = write!(
            html,
            "<p><b>Modelled, not measured:</b> {modelled} of the {} points were simulated in \
             virtual time with a CPU model (<code>--runtime sim</code>; each point's run page \
             has the model and its costs), marked in the table below.</p>",
            s.points.len()
        );
    }
    for d in s.deviations {
        let _ = write!(html, "<p><b>Deviation:</b> {}</p>", escape(d));
    }
    let mut runs: Vec<&str> = s.points.iter().map(|p| p.run.as_str()).collect();
    runs.dedup();
    let mut protocols: Vec<&str> = s.points.iter().map(|p| p.protocol.as_str()).collect();
    protocols.sort();
    protocols.dedup();
    html += "<div class=\"charts\">";
    match sweep {
        Some(option) => {
            for run in &runs {
                let series: Vec<Series> = protocols
                    .iter()
                    .map(|proto| Series {
                        name: proto,
                        points: s
                            .points
                            .iter()
                            .filter(|p| p.run == *run && p.protocol == *proto)
                            .filter_map(|p| {
                                let x: f64 = p.sweep_value.as_deref()?.parse().ok()?;
                                Some((x, p.throughput_tps))
                            })
                            .collect(),
                    })
                    .collect();
                html += &line_chart(
                    &format!("{run}: throughput against {option}"),
                    option,
                    "transactions / s",
                    &series,
                    None,
                );
            }
        }
        None => {
            let categories: Vec<String> = runs.iter().map(|r| r.to_string()).collect();
            let values: Vec<Vec<f64>> = protocols
                .iter()
                .map(|proto| {
                    runs.iter()
                        .map(|run| {
                            s.points
                                .iter()
                                .find(|p| p.run == *run && p.protocol == *proto)
                                .map_or(0.0, |p| p.throughput_tps)
                        })
                        .collect()
                })
                .collect();
            html += &bar_chart(
                "Throughput per run",
                "transactions / s",
                &categories,
                &values,
                &protocols,
            );
        }
    }
    html += "</div><h2>Points</h2><table><tr><th>run</th><th>value</th><th>protocol</th>\
             <th>throughput tps</th><th>goodput tps</th><th>abort rate</th><th>p50 ms</th>\
             <th>p99 ms</th><th>ratio</th><th>perceived p50 ms</th><th>misspeculation</th>\
             <th>degree at end</th><th>modelled</th></tr>";
    for p in s.points {
        let optional = |v: Option<String>| v.unwrap_or_else(|| "—".into());
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}%</td>\
             <td>{:.2}</td><td>{:.2}</td><td>{:.3}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&p.run),
            escape(p.sweep_value.as_deref().unwrap_or("")),
            escape(&p.protocol),
            p.throughput_tps,
            p.goodput_tps,
            p.abort_rate * 100.0,
            p.p50_ms,
            p.p99_ms,
            p.throughput_ratio,
            optional(p.perceived_p50_ms.map(|v| format!("{v:.2}"))),
            optional(p.misspeculation_rate.map(|v| format!("{:.1}%", v * 100.0))),
            escape(&optional(p.final_degree.clone())),
            if p.modelled { "yes" } else { "no" },
        );
    }
    html += "</table>";
    if !s.skipped.is_empty() {
        html += "<h2>Skipped</h2><ul>";
        for k in s.skipped {
            let _ = write!(html, "<li>{}</li>", escape(k));
        }
        html += "</ul>";
    }
    html + "</body></html>\n"
}

/// The experiment files under `dir`, sorted.
#[cfg(test)]
fn files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_become_the_bench_command_line() {
        let t: toml::Table = toml::from_str(
            r#"protocol = ["nocc", "clocksi-rep"]
               nodes = 9
               think_ms = 2.5
               check = true
               set = ["contention=low", "keys_per_txn=10"]"#,
        )
        .unwrap();
        assert_eq!(
            argv(&t).unwrap(),
            [
                "--check",
                "--nodes",
                "9",
                "--protocol",
                "nocc,clocksi-rep",
                "--set",
                "contention=low",
                "--set",
                "keys_per_txn=10",
                "--think-ms",
                "2.5"
            ]
        );
    }

    #[test]
    fn an_experiment_chooses_the_placement() {
        let t: toml::Table = toml::from_str(
            r#"placement = "hash:partitions=64"
               nodes = 4
               protocol = ["nocc"]"#,
        )
        .unwrap();
        let args = BenchOnly::try_parse_from(argv(&t).unwrap()).unwrap().args;
        let config = args.validate().unwrap();
        assert_eq!(config.placement.partition_count(), 64);
        let summary = serde_json::to_value(&config).unwrap();
        assert_eq!(summary["placement"], "hash:partitions=64");
        assert_eq!(summary["partitions"], 64);
        // An unknown layout parses (the flag is a string) and is refused by validation.
        let t: toml::Table = toml::from_str(r#"placement = "chord""#).unwrap();
        let args = BenchOnly::try_parse_from(argv(&t).unwrap()).unwrap().args;
        let e = args.validate().err().unwrap();
        assert!(
            e.to_string()
                .contains("unknown placement 'chord'; valid placements: ring, hash"),
            "{e}"
        );
    }

    #[test]
    fn unknown_protocols_are_refused() {
        let v = toml::Value::Array(vec![
            "clocksi-rep".into(),
            "oab-spec:final_delay_ms=400".into(),
        ]);
        assert_eq!(known(&v).unwrap().len(), 2);
        let typo = toml::Value::Array(vec!["clocksi-rp".into()]);
        assert!(known(&typo).is_err());
    }

    #[test]
    fn every_experiment_file_parses() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
        let files = files(&dir).unwrap();
        assert!(!files.is_empty());
        for f in files {
            let e = load(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            assert!(
                !e.headline.is_empty() && !e.setting.is_empty(),
                "{}",
                f.display()
            );
        }
    }
}
