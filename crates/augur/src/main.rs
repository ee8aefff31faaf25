//! The `augur` command.

use augur::BadInput;
use augur::client_cli::{Ended, Op};
use augur::{bench, node};
use augur::{experiment, nemesis};

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "augur",
    version,
    about = "A partitioned, replicated, multi-version transactional key-value store with pluggable concurrency control"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run protocols on an embedded (or loopback TCP) cluster and compare them.
    Bench(Box<bench::BenchArgs>),
    /// Run a protocol in the deterministic simulator under faults and check every seed's
    /// history against the isolation level it claims. Exit status: 0 every seed passed, 1 an
    /// anomaly, a liveness or quiescence failure, or a broken promise of the protocol (an
    /// aborted read-only transaction where none may abort...) was found, 2 bad input.
    Check(Box<augur::check::CheckArgs>),
    /// Fault injection over real processes: start a cluster of node processes (each in a
    /// network namespace where possible), run `bank` and `list-append` with recorded histories
    /// while killing, pausing, partitioning, clock-skewing and restarting nodes, then check the
    /// histories at the protocol's level, that nothing acknowledged was lost and that the
    /// cluster commits again within a bound. Exit status: 0 every check passed, 1 one failed,
    /// 2 bad input.
    Nemesis(Box<nemesis::NemesisArgs>),
    /// Serve one node of a cluster described by a TOML file.
    Node {
        /// The cluster file (see docs/cluster-config.md).
        #[arg(long)]
        config: PathBuf,
        /// This node's id in the cluster file.
        #[arg(long)]
        id: u32,
        /// Where the node keeps its write-ahead log and checkpoints (created if missing; a
        /// node restarted with the same directory recovers from it). Without it the node keeps
        /// its state in memory only, and says so.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Worker threads of the node's async runtime (default: one per core). Nodes that
        /// share a machine do better with a share of its cores each: every extra thread a node
        /// wakes costs context switches that another node could have used.
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
        threads: Option<u16>,
        /// Fault injection: this node's clock reads MS milliseconds ahead of the system clock
        /// (behind if negative), as `augur nemesis` skews nodes. Never needed otherwise.
        #[arg(
            long,
            value_name = "MS",
            default_value_t = 0,
            allow_negative_numbers = true
        )]
        clock_offset_ms: i64,
    },
    /// Read one key of a running cluster: prints its value (exit 0), or exits 3 if it has
    /// none; 1 if the transaction aborted (the reason on standard error) or the cluster could
    /// not be used.
    Get {
        key: String,
        #[command(flatten)]
        target: ClusterTarget,
    },
    /// Write one key of a running cluster (exit 0 once committed).
    Put {
        key: String,
        value: String,
        #[command(flatten)]
        target: ClusterTarget,
    },
    /// Run several operations as one transaction: each argument is `get KEY`, `put KEY VALUE`
    /// or `del KEY` (quote each); every get prints `KEY VALUE` (or `KEY` alone if absent).
    Txn {
        #[arg(required = true)]
        ops: Vec<String>,
        #[command(flatten)]
        target: ClusterTarget,
    },
    /// An interactive session with a running cluster: begin, get, put, del, commit, abort
    /// (`help` inside lists them).
    Shell {
        #[command(flatten)]
        target: ClusterTarget,
    },
    /// Make a certificate authority and one certificate per node for a TLS cluster (PEM files:
    /// ca.crt, ca.key, node-I.crt, node-I.key; keys readable by their owner only).
    Certs {
        /// Directory to write into (created if missing; existing files are never overwritten).
        #[arg(long)]
        out: PathBuf,
        /// How many nodes to make certificates for (ids 0..N).
        #[arg(long)]
        nodes: usize,
        /// The cluster's name, written into the CA's certificate.
        #[arg(long, default_value = "augur")]
        cluster_id: String,
    },
    /// Set up a cluster.
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// List the implemented protocols with the isolation level each claims, its paper, the
    /// request forms it serves, its mutants, settings and speculation.
    Protocols {
        /// Print only the names, one per line (for scripts).
        #[arg(long, conflicts_with = "markdown")]
        names: bool,
        /// Print the protocol table README.md and the architecture guide carry (Markdown).
        #[arg(long)]
        markdown: bool,
    },
}

/// Which cluster, and which node of it, a client command talks to.
#[derive(clap::Args)]
struct ClusterTarget {
    /// The cluster file (its CA and client token are read from beside it).
    #[arg(long)]
    cluster: PathBuf,
    /// The node that coordinates the transaction (default: the master of the first key).
    #[arg(long)]
    node: Option<u32>,
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// Write a working loopback cluster with TLS into a directory: DIR/cluster.toml,
    /// certificates, a client token and one data directory per node. Start node I with
    /// `augur node --config DIR/cluster.toml --id I`.
    Init {
        /// Directory to create the cluster in (an existing cluster.toml is never overwritten).
        #[arg(long)]
        dir: PathBuf,
        /// Number of nodes (and partitions, with `--placement ring`).
        #[arg(long)]
        nodes: usize,
        /// The protocol every node runs.
        #[arg(long, default_value = "clocksi-rep")]
        protocol: String,
        /// Node I listens on 127.0.0.1:(BASE_PORT + I).
        #[arg(long, default_value_t = 7100)]
        base_port: u16,
        /// Replicas per partition, master included (default: min(3, nodes)).
        #[arg(long)]
        replication: Option<usize>,
        /// How partitions are laid out over the nodes: `ring` (partition i mastered by node i) or
        /// `hash` (consistent hashing; `hash:partitions=N:vnodes=V`). Written to the cluster file.
        #[arg(long, default_value = "ring")]
        placement: String,
        /// One host per node, comma-separated, for nodes on other machines or containers:
        /// node I is reached at HOST_I:BASE_PORT and listens on 0.0.0.0:BASE_PORT.
        #[arg(long, value_delimiter = ',')]
        hosts: Vec<String>,
        /// Latency profile: lan, 3dc, ec2-9dc (where the nodes sit).
        #[arg(long, default_value = "lan")]
        latency: String,
        /// Delay peer messages by the profile in the nodes themselves (true, for one machine),
        /// or leave it to the network (false, e.g. with `augur cluster netem`).
        #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
        emulate_latency: bool,
    },
    /// Print the `tc` commands that delay node ID's packets to the other nodes by the latency
    /// profile's one-way delays (for containers; node addresses must be IP addresses).
    Netem {
        /// The cluster file.
        #[arg(long)]
        config: PathBuf,
        /// The node whose interface is set up.
        #[arg(long)]
        id: u32,
        /// The network interface.
        #[arg(long, default_value = "eth0")]
        dev: String,
        /// The `tc` program to call in the commands.
        #[arg(long, default_value = "tc")]
        tc: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Warnings by default, and the one line a node logs when it starts serving; a node process
    // also logs each change of who masters its partitions (in a simulation or an in-process
    // bench, every node of every run would). RUST_LOG overrides. Colour only on a terminal:
    // logs that go to files stay plain text.
    let default_filter = match cli.command {
        Command::Node { .. } => "warn,augur::node=info,augur::configuration=info",
        _ => "warn,augur::node=info",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    // Rust ignores SIGPIPE, which turns `augur check ... | head` into a panic on the next print;
    // a command-line tool should simply stop, as other Unix tools do. Only for the commands
    // that talk to no other process: a node, a benchmark or a client given the default would
    // be killed by the first write to a connection its peer had closed (the nemesis found a
    // node dying so after SIGSTOP/SIGCONT), where ignoring it turns that write into an error
    // the connection's owner handles.
    let prints_only = matches!(
        cli.command,
        Command::Check(_) | Command::Protocols { .. } | Command::Certs { .. } | Command::Cluster(_)
    );
    #[cfg(unix)]
    if prints_only {
        // SAFETY: no thread exists yet (the logger starts none); it only restores the default
        // disposition of one signal.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    let result = match cli.command {
        Command::Bench(args) => run_bench(&args),
        Command::Check(args) => augur::check::run(&args),
        Command::Nemesis(args) => augur::interrupt::unless_requested(nemesis::run(&args)),
        Command::Node {
            config,
            id,
            data_dir,
            threads,
            clock_offset_ms,
        } => node::run(
            &config,
            id,
            data_dir.as_deref(),
            threads.map(usize::from),
            clock_offset_ms,
        ),
        Command::Get { key, target } => {
            return client_command(&target, vec![Op::Get(key)], |reads| {
                match reads.into_iter().next().and_then(|(_, v)| v) {
                    Some(value) => {
                        augur::client_cli::print_value(&value)?;
                        Ok(ExitCode::SUCCESS)
                    }
                    None => Ok(ExitCode::from(augur::client_cli::ABSENT)),
                }
            });
        }
        Command::Put { key, value, target } => {
            return client_command(&target, vec![Op::Put(key, value)], |_| {
                Ok(ExitCode::SUCCESS)
            });
        }
        Command::Txn { ops, target } => {
            let ops: Result<Vec<Op>, String> = ops.iter().map(|op| Op::parse(op)).collect();
            let ops = match ops {
                Ok(ops) => ops,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            return client_command(&target, ops, |reads| {
                for (key, value) in reads {
                    match value {
                        Some(v) => println!("{key} {}", String::from_utf8_lossy(&v)),
                        None => println!("{key}"),
                    }
                }
                Ok(ExitCode::SUCCESS)
            });
        }
        Command::Shell { target } => augur::shell::run(&target.cluster, target.node),
        Command::Certs {
            out,
            nodes,
            cluster_id,
        } => augur::provision::write_certs(&out, &cluster_id, nodes).map(|()| {
            println!(
                "wrote a CA and {nodes} node certificates to {}",
                out.display()
            );
        }),
        Command::Cluster(ClusterCommand::Init {
            dir,
            nodes,
            protocol,
            base_port,
            replication,
            placement,
            hosts,
            latency,
            emulate_latency,
        }) => augur::provision::init(&augur::provision::InitOptions {
            dir: &dir,
            nodes,
            protocol: &protocol,
            base_port,
            replication,
            placement: &placement,
            hosts: &hosts,
            latency: &latency,
            emulate_latency,
        })
        .map(|path| {
            println!("wrote {}", path.display());
            println!(
                "start each node with: augur node --config {} --id I   (I = 0..{})",
                path.display(),
                nodes - 1
            );
        }),
        Command::Cluster(ClusterCommand::Netem {
            config,
            id,
            dev,
            tc,
        }) => augur::cluster::Cluster::load(&config)
            .and_then(|cluster| {
                augur::provision::netem_script(&cluster, augur_types::NodeId(id), &dev, &tc)
            })
            .map(|script| print!("{script}")),
        Command::Protocols { names, markdown } => {
            if markdown {
                print!("{}", augur_protocols::registry::markdown_table());
            } else {
                list_protocols(names);
            }
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            if e.downcast_ref::<BadInput>().is_some() {
                ExitCode::from(2)
            } else if e.downcast_ref::<augur::interrupt::Interrupted>().is_some() {
                ExitCode::from(augur::interrupt::EXIT_STATUS)
            } else if e.downcast_ref::<augur::check::Undecided>().is_some() {
                ExitCode::from(augur::check::EXIT_UNDECIDED)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// Run a command-line transaction and turn its end into an exit status (see
/// `augur::client_cli`).
fn client_command(
    target: &ClusterTarget,
    ops: Vec<Op>,
    committed: impl FnOnce(augur::client_cli::Reads) -> anyhow::Result<ExitCode>,
) -> ExitCode {
    let result =
        augur::client_cli::run(&target.cluster, target.node, &ops).and_then(|ended| match ended {
            Ended::Committed(reads) => committed(reads),
            Ended::Aborted(why) => {
                eprintln!("{why}");
                Ok(ExitCode::FAILURE)
            }
        });
    result.unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        if e.downcast_ref::<BadInput>().is_some() {
            ExitCode::from(2)
        } else {
            ExitCode::FAILURE
        }
    })
}

fn list_protocols(names_only: bool) {
    if names_only {
        for p in augur_protocols::registry::PROTOCOLS {
            println!("{}", p.name);
        }
        return;
    }
    println!("{:<14} {:<40} paper", "protocol", "isolation level");
    for p in augur_protocols::registry::PROTOCOLS {
        println!("{:<14} {:<40} {}", p.name, p.isolation.to_string(), p.paper);
        println!("{:<14} {}", "", p.summary);
        println!("{:<14} engine: {}", "", p.engine);
        println!("{:<14} requests: {}", "", p.forms_description());
        for (name, what) in p.mutants {
            println!("{:<14} mutant {name}: {what}", "");
        }
        for setting in p.all_settings() {
            println!("{:<14} setting protocol.{setting}", "");
        }
        if let Some(offer) = p.speculation {
            let degrees = augur_client::Degree::ladder(offer.reads, offer.max_chain);
            let degrees: Vec<String> = degrees.iter().map(|d| d.to_string()).collect();
            println!(
                "{:<14} speculation (default {}): {} or auto",
                "",
                offer.default,
                degrees.join(", ")
            );
        }
    }
    println!();
    println!("reference peers (augur bench --protocol NAME --pg-url URL):");
    for p in bench::peers::PEERS {
        println!("{:<25} {:<40} {}", p.name, p.isolation.to_string(), p.paper);
    }
}

/// `augur bench`: one run from the command line, or an experiment file (`--config`).
fn run_bench(args: &bench::BenchArgs) -> anyhow::Result<()> {
    bench::interrupt::install();
    if let Some(path) = &args.config {
        let ignored = args.flags_beside_config();
        if !ignored.is_empty() {
            return Err(BadInput(format!(
                "--config {} sets its runs itself, so {} would be ignored: drop them (with --config, only --out, --smoke, --only, --sweep-values, --runtime, --duration, --warmup and --set sim.* apply)",
                path.display(),
                ignored.join(", ")
            ))
            .into());
        }
        let selection = experiment::Selection {
            smoke: args.smoke,
            runs: args.only.clone(),
            sweep_values: args.sweep_values.clone(),
            runtime: args.runtime,
            duration: args.duration,
            warmup: args.warmup,
            sim_settings: args
                .set
                .iter()
                .filter(|kv| kv.starts_with("sim."))
                .cloned()
                .collect(),
        };
        let ran = experiment::run(path, &args.out, &selection, &bench::run_config);
        return augur::interrupt::unless_requested(ran);
    }
    let config = args.validate()?;
    augur::interrupt::unless_requested(bench::run_config(&config).and_then(|f| f.into_result()))
}
