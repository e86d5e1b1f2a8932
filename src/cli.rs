//! Every flag and subcommand of `dlqctl`, in one place. Doc comments here are the `--help`
//! text, and `tests/lint.rs` snapshots it (`tests/cli.rs` checks the completions and man page
//! generated from it), so README and binary stay in agreement.

use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

/// Declarative dead-letter queues for SQS, RabbitMQ, Kafka and Google Cloud Pub/Sub.
///
/// One YAML spec per channel (retries, backoff, retention, dead-letter naming, alarms) is
/// checked by `lint`, compared with the live systems by `plan`, and made real by `apply`.
#[derive(Debug, Parser)]
#[command(name = "dlqctl", version = crate::version::VERSION, max_term_width = 100)]
#[command(after_help = "Examples:
  dlqctl lint dlq/                  check the specs offline (pre-commit, CI)
  dlqctl plan dlq/ --detailed-exitcode
  dlqctl apply dlq/                 show the plan, ask, apply
  dlqctl <COMMAND> --help           an example for each command")]
pub struct Cli {
    /// When to use colour: auto (a terminal, and NO_COLOR unset), always, never.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,

    /// Log what dlqctl does on the wire to stderr: targets, endpoints, each request's method
    /// and path, timings, retries (-vv: more detail). Never a credential. Also shows each lint
    /// warning in full, which commands other than `lint` fold to one line per rule.
    #[arg(short, long, global = true, action = ArgAction::Count)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

/// The printer owns the colour choice; the face only offers it as `--color`.
pub use crate::printer::ColorChoice;

/// How many changes run at once on each target unless `--parallelism` says otherwise (chosen
/// by measurement: BENCHMARKS.md §8).
pub const DEFAULT_PARALLELISM: usize = 8;

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check spec files offline: schema, then domain rules. Exit 0 clean, 1 findings, 2 I/O error, 64 usage error.
    #[command(after_help = "Example:
  dlqctl lint dlq/ --deny-warnings --format sarif > dlqctl.sarif")]
    Lint(LintArgs),
    /// Compare the specs with the live systems and show the changes. Read-only.
    #[command(after_help = "Example:
  dlqctl plan dlq/ --format markdown --out plan.json --detailed-exitcode")]
    Plan(PlanArgs),
    /// Make the live systems match the specs (or a saved plan).
    #[command(after_help = "Examples:
  dlqctl apply dlq/                     show the plan, ask for `yes`, apply
  dlqctl apply plan.json                a plan saved by `dlqctl plan --out plan.json`

Exit codes:
  0   everything was applied (or there was nothing to change)
  1   an error or a refusal; nothing, or only the steps reported as done, was applied:
      lint errors, a target that cannot be reached or refuses the credentials, a replace,
      delete or message loss not allowed by its --allow-* flag, `yes` not typed (or no
      terminal and no --auto-approve), a saved plan whose live state or files changed, a step
      that failed, Ctrl-C or SIGTERM (the steps in flight finish first)
  64  usage error (an unknown flag or value)")]
    Apply(ApplyArgs),
    /// Write specs for what already exists on a target (read-only), to adopt it.
    ///
    /// Reads the queues, policies, exchanges, topics and alarms of one target and writes one
    /// channel spec per dead-letter channel found, grouping each source with its DLQ, retry
    /// queues or topics and alarms by following the live links. What a spec cannot express,
    /// and what fits no channel, is listed on stderr per resource; stdout lists the files
    /// written. Nothing is changed on the target: SQS queues and alarms not tagged, and Pub/Sub
    /// topics and subscriptions not labelled, as dlqctl's are adopted later by `dlqctl apply
    /// --adopt`, which only adds the tags or labels. See docs/import.md.
    #[command(after_help = "Example:
  dlqctl import --target local-rabbitmq --prefix orders. --out dlq/")]
    Import(ImportArgs),
    /// Write the JSON schemas of the spec documents (for editors and CI).
    #[command(after_help = "Example:
  dlqctl schema --out-dir schemas --check")]
    Schema(SchemaArgs),
    /// Show what waits in each channel's dead-letter queue: depth, age of the oldest, error
    /// classes, samples.
    ///
    /// Nothing is consumed, moved or changed. Where a backend cannot read without leaving a
    /// trace, each read is the gentlest there is, and said so: SQS receives with visibility
    /// timeout 0 (the receive count goes up by one), RabbitMQ gets and requeues (the message
    /// is marked redelivered), Kafka reads by assignment (no group, no commit), Pub/Sub pulls
    /// and hands straight back (modifyAckDeadline 0; its depth is counted that way, up to --scan). A read that
    /// could lose or move a message (a RabbitMQ quorum queue with a delivery limit; an SQS
    /// dead-letter queue with its own redrive policy) is refused with a note.
    /// `--no-peek` reads no message at all. Payloads are shown escaped. See docs/status.md.
    #[command(after_help = "Example:
  dlqctl status dlq/ --channel orders --samples 5")]
    Status(StatusArgs),
    /// Serve the status figures as Prometheus metrics on /metrics (for alert rules).
    ///
    /// Reads every channel once per --interval and answers scrapes from that reading, so
    /// scrapes never reach the brokers. Depth and Kafka ages need no peek; SQS and RabbitMQ
    /// ages and error classes need --peek (reads that leave a trace, as in `dlqctl status`).
    /// A dead letter that carries no time is aged from when the exporter first saw it
    /// (basis="first-seen", a lower bound); dlq_oldest_message_age_known says which.
    #[command(after_help = "Example:
  dlqctl exporter dlq/ --listen 127.0.0.1:9464 --interval 30s")]
    Exporter(ExporterArgs),
    /// Move dead letters back to the channel's main queue or topic (or elsewhere), losing none.
    ///
    /// At least once, never lost: a message leaves the dead-letter queue only after the
    /// destination confirmed it (a crash in between may duplicate it). The copy counts one more
    /// `dlq-redrive-count`; messages already brought back `deadLetter.maxRedrives` times (default
    /// 3) are skipped and reported. One redrive per dead-letter queue at a time. Asks before
    /// moving on a terminal; without one, needs --yes. Ctrl-C finishes what is in flight and
    /// reports. What each backend does: docs/redrive.md.
    #[command(after_help = "Example:
  dlqctl redrive orders dlq/ --dry-run
  dlqctl redrive orders dlq/ --limit 100 --rate 50 --class transient_exhausted")]
    Redrive(Box<RedriveArgs>),
    /// Archive dead letters to a folder or S3 (JSON Lines and a manifest), before they expire.
    ///
    /// One object per batch (one record per message: id, body, headers, properties, envelope,
    /// times), listed with its sha256 in the run's manifest. With --delete a message leaves
    /// the dead-letter queue only after its object is durable (written, re-read, checksummed)
    /// and listed: at least once, never lost (a crash in between may archive it twice).
    /// Without --delete nothing is removed. S3 uses the standard AWS configuration
    /// (AWS_ENDPOINT_URL_S3 and the like). --delete asks on a terminal; without one, needs
    /// --yes. --due archives what would expire within `deadLetter.archive.before`, to
    /// `deadLetter.archive.to`. Exit 0 done (or nothing ever due), 1 error or not complete.
    /// See docs/archive.md.
    #[command(after_help = "Examples:
  dlqctl archive orders dlq/ --to ./archive --dry-run
  dlqctl archive orders dlq/ --to s3://dlq-archive/prod --older-than 7d --delete --yes
  dlqctl archive orders dlq/ --due --delete --yes")]
    Archive(Box<ArchiveArgs>),
    /// Check audit journals (`--audit-log FILE`) for tampering: each record's `prev` chains it
    /// to the line before, and with the target's key each record's `hmac` must verify.
    ///
    /// A line changed, removed or inserted breaks the chain at the next line, which is named.
    /// Without the key, whoever can write the file can recompute the chain: pass --key-env
    /// where the target names `operations.hmacKeyEnv`. Lines cut from the end are detected by
    /// neither. Nothing is changed. Exit 0 intact, 1 broken, 2 unreadable, 64 usage error.
    /// See docs/redrive.md (the audit journal).
    #[command(after_help = "Example:
  dlqctl audit /var/log/dlqctl/orders.jsonl --key-env DLQCTL_HMAC_KEY")]
    Audit(AuditArgs),
    /// Write Prometheus alerting rules for the alarms of RabbitMQ and Kafka channels, or Cloud
    /// Monitoring alert policies for Pub/Sub channels (offline).
    ///
    /// One group per target, one rule per channel, alarm and tier, over the metrics `dlqctl
    /// exporter` serves (dlq_depth, dlq_oldest_message_age_seconds, the flow counters of the
    /// dead-letter rate), plus one rule per target for an exporter that is down or absent
    /// (dlq_up), and one per channel with an age alarm for dead letters whose age is unknown
    /// (dlq_oldest_message_age_known). Labels: severity, channel, target and the channel's
    /// metadata.labels. SQS channels are left out: their alarms are CloudWatch alarms,
    /// provisioned by `dlqctl apply`; so are Pub/Sub channels, whose alert policies
    /// `--format cloud-monitoring --out DIR` writes, one file per channel and tier. Exit 0
    /// written (or, with --check, up to date), 1 lint errors or I/O error, 2 with --check: the
    /// file or folder differs, 64 usage error.
    /// See docs/alerts.md.
    #[command(after_help = "Example:
  dlqctl alerts dlq/ --format prometheus-operator --out dlq-alerts.yaml")]
    Alerts(AlertsArgs),
    /// Write Grafana dashboards of the channels into a folder, one per target or team (offline).
    ///
    /// One JSON file per target (or per `metadata.labels.team` with --by team), a row per
    /// channel: the dead-letter queue's depth and oldest age with the alarm tiers drawn as
    /// thresholds (warning yellow, critical red), the dead-letter rate against
    /// `alarms.deadLetterRate`, the error classes, and the `dlqctl status` and `redrive`
    /// commands with the runbook. RabbitMQ, Kafka and Pub/Sub panels read `dlqctl exporter`'s
    /// metrics through a Prometheus data source (variable `datasource`), SQS panels CloudWatch's
    /// AWS/SQS metrics (variable `cloudwatch`). Stable uids, deterministic bytes. --out
    /// replaces only files it wrote and removes those no spec produces any more. Exit 0
    /// written (or, with --check, up to date), 1 lint errors or I/O error, 2 with --check: a
    /// file differs, is missing or is no longer produced, 64 usage error.
    /// See docs/dashboards.md.
    #[command(after_help = "Examples:
  dlqctl dashboards dlq/ --out grafana/dashboards
  dlqctl dashboards dlq/ --by team --check grafana/dashboards     in pull-request CI")]
    Dashboards(DashboardsArgs),
    /// Draw each channel: its main queue or topic, retry stages (with their delays), dead-letter
    /// queue (its retention, or the decision to discard) and alarms or alert rules (offline).
    ///
    /// Built as `apply` would build the channels, from the specs alone: every node is an
    /// object apply creates, under its name. Mermaid (GitHub and GitLab draw a ```mermaid
    /// block; `mmdc` makes an image) or Graphviz DOT. The markdown plan opens each channel
    /// with the same picture, coloured by what the plan changes. Exit 0 drawn, 1 lint errors
    /// or I/O error, 64 usage error.
    #[command(after_help = "Examples:
  dlqctl graph dlq/ > channels.mmd && mmdc -i channels.mmd -o channels.svg
  dlqctl graph dlq/ --format dot | dot -Tsvg > channels.svg")]
    Graph(GraphArgs),
    /// Print a shell completion script (bash, zsh, fish, powershell, elvish) to stdout.
    ///
    /// Generated from the same definitions as --help, so it knows every subcommand and flag.
    #[command(after_help = "Examples:
  source <(dlqctl completions bash)                                  bash, this shell
  dlqctl completions bash > ~/.local/share/bash-completion/completions/dlqctl
  dlqctl completions zsh > \"${fpath[1]}/_dlqctl\"
  dlqctl completions fish > ~/.config/fish/completions/dlqctl.fish")]
    Completions(CompletionsArgs),
    /// Print the man page (roff) to stdout, or write one page per command into a folder.
    #[command(after_help = "Examples:
  dlqctl man | man -l -
  dlqctl man --out-dir /usr/local/share/man/man1     dlqctl.1, dlqctl-lint.1, ...")]
    Man(ManArgs),
}

impl Command {
    /// The exit code for an error that stops the command (I/O, connection, usage).
    pub fn error_code(&self) -> u8 {
        match self {
            Command::Lint(_) | Command::Schema(_) | Command::Audit(_) => 2,
            Command::Completions(_) | Command::Man(_) => 1,
            Command::Plan(_)
            | Command::Apply(_)
            | Command::Import(_)
            | Command::Status(_)
            | Command::Exporter(_)
            | Command::Redrive(_)
            | Command::Archive(_)
            | Command::Alerts(_)
            | Command::Dashboards(_)
            | Command::Graph(_) => 1,
        }
    }
}

/// A command line that parses but asks for what cannot be run as written (a `--where` or
/// `--transform` program that does not compile or is refused: `import`, `env`, `halt`, a
/// number a float cannot hold): said as any error is, on one line, and exits 64 as clap's own
/// refusals do, so that a script tells a typo from a run that failed (issue 52, hx1 F6, F10).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LintFormat {
    /// Source excerpts with carets, for people.
    Human,
    /// One JSON document (format_version 1), for tools.
    Json,
    /// GitHub Actions workflow annotations.
    Github,
    /// SARIF 2.1.0, for code scanning (GitHub's upload-sarif and other SARIF viewers).
    Sarif,
}

#[derive(Debug, Args)]
pub struct LintArgs {
    /// Spec files or folders (read recursively: *.yaml, *.yml).
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,

    /// The Targets file; default: dlqctl.yaml among, beside or above the paths.
    #[arg(long, value_name = "FILE")]
    pub targets: Option<PathBuf>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = LintFormat::Human)]
    pub format: LintFormat,

    /// Exit 1 on warnings too.
    #[arg(long)]
    pub deny_warnings: bool,

    /// Print only errors and warnings, not infos nor the summary line.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The target to read, as named in the Targets file.
    #[arg(long, value_name = "NAME")]
    pub target: String,

    /// Only channels with a resource whose name starts with this (the target's ownership
    /// prefixes always apply).
    #[arg(long, value_name = "P")]
    pub prefix: Option<String>,

    /// Folder to write the specs into (one `<channel>.yaml` each; created if missing).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub out: PathBuf,

    /// The Targets file; default: dlqctl.yaml in, beside or above DIR, else the current folder.
    #[arg(long, value_name = "FILE")]
    pub targets: Option<PathBuf>,

    /// Overwrite spec files that already exist in DIR.
    #[arg(long)]
    pub force: bool,

    /// Accept TLS certificates that cannot be verified (prints a warning). Never the default.
    #[arg(long)]
    pub insecure: bool,

    /// Seconds a target's reads may spend, in all, on attempts that get no answer (timeouts,
    /// refused or dropped connections) before the target is given up on. Throttled and
    /// successful reads do not count.
    #[arg(long, value_name = "SECS", env = "DLQCTL_READ_TIMEOUT", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub read_timeout: u64,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write dlqctl.1 and one dlqctl-<command>.1 per command into DIR (created if missing)
    /// instead of printing dlqctl.1.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The journals to check (files `--audit-log` appends to).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// The environment variable holding the HMAC key (the one the target's
    /// `operations.hmacKeyEnv` names): every chained record's `hmac` must verify with it.
    #[arg(long, value_name = "VAR")]
    pub key_env: Option<String>,
}

#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Folder to write channel.v1.json, targets.v1.json, defaults.v1.json and plan.v1.json into.
    #[arg(long, default_value = "schemas", value_name = "DIR")]
    pub out_dir: PathBuf,

    /// Write nothing; exit 1 if the files in DIR differ from this binary's schemas.
    #[arg(long)]
    pub check: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AlertsFormat {
    /// A Prometheus rules file (for `rule_files:`; `promtool check rules` reads it).
    Prometheus,
    /// The same rule groups in a Prometheus Operator `PrometheusRule` manifest.
    PrometheusOperator,
    /// Pub/Sub channels' Cloud Monitoring alert policies (the Monitoring API's AlertPolicy as
    /// JSON), one file per channel and tier in the folder --out (or --check) names.
    CloudMonitoring,
    /// Azure Service Bus channels' depth alarms as Azure Monitor metric alerts (ARM deployment
    /// templates of Microsoft.Insights/metricAlerts), one file per channel and tier in the
    /// folder --out (or --check) names.
    AzureMonitor,
}

#[derive(Debug, Args)]
pub struct AlertsArgs {
    /// Spec files or folders (read recursively: *.yaml, *.yml).
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,

    /// The Targets file; default: dlqctl.yaml among, beside or above the paths.
    #[arg(long, value_name = "FILE")]
    pub targets: Option<PathBuf>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = AlertsFormat::Prometheus)]
    pub format: AlertsFormat,

    /// Write the rules to FILE instead of stdout (cloud-monitoring, azure-monitor: the files
    /// into the folder FILE, replacing and removing only files dlqctl wrote).
    #[arg(long, value_name = "FILE", conflicts_with = "check")]
    pub out: Option<PathBuf>,

    /// Write nothing; exit 2 (with a short diff) when FILE differs from what the specs
    /// produce, 0 when it is the same. For pull-request CI. (cloud-monitoring, azure-monitor:
    /// the folder FILE, stale when a file differs, is missing, or is no longer produced.)
    #[arg(long, value_name = "FILE")]
    pub check: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DashboardsBy {
    /// One dashboard per target (the Targets document's names).
    Target,
    /// One dashboard per `metadata.labels.team`; channels without a team share one.
    Team,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("dashboards_dest").required(true).args(["out", "check"])))]
pub struct DashboardsArgs {
    /// Spec files or folders (read recursively: *.yaml, *.yml).
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,

    /// The Targets file; default: dlqctl.yaml among, beside or above the paths.
    #[arg(long, value_name = "FILE")]
    pub targets: Option<PathBuf>,

    /// Write the dashboards into DIR (created if missing), one FILE.json each.
    #[arg(long, value_name = "DIR", conflicts_with = "check")]
    pub out: Option<PathBuf>,

    /// Write nothing; exit 2 (with a short diff) when DIR's dashboards differ from what the
    /// specs produce, 0 when they are the same. For pull-request CI.
    #[arg(long, value_name = "DIR")]
    pub check: Option<PathBuf>,

    /// One dashboard per target or per team label.
    #[arg(long, value_enum, default_value_t = DashboardsBy::Target)]
    pub by: DashboardsBy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GraphFormat {
    /// A Mermaid flowchart, one subgraph per channel.
    Mermaid,
    /// A Graphviz digraph, one cluster per channel.
    Dot,
}

#[derive(Debug, Args)]
pub struct GraphArgs {
    /// Spec files or folders (read recursively: *.yaml, *.yml).
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,

    /// The Targets file; default: dlqctl.yaml among, beside or above the paths.
    #[arg(long, value_name = "FILE")]
    pub targets: Option<PathBuf>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = GraphFormat::Mermaid)]
    pub format: GraphFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlanFormat {
    /// For people: each change with field-level old → new.
    Human,
    /// The versioned plan document (schemas/plan.v1.json), as `--out` saves it.
    Json,
    /// A pull-request comment, under 60,000 characters (docs/ci.md).
    Markdown,
}

/// Where specs and connections come from; shared by plan and apply.
#[derive(Debug, Args)]
pub struct SpecArgs {
    /// The Targets file; default: dlqctl.yaml among, beside or above the paths.
    #[arg(long, value_name = "FILE")]
    pub targets: Option<PathBuf>,

    /// Accept TLS certificates that cannot be verified (prints a warning). Never the default.
    #[arg(long)]
    pub insecure: bool,

    /// Seconds a target's reads may spend, in all, on attempts that get no answer (timeouts,
    /// refused or dropped connections) before the target is given up on. Throttled and
    /// successful reads do not count.
    #[arg(long, value_name = "SECS", env = "DLQCTL_READ_TIMEOUT", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub read_timeout: u64,
}

/// What a plan covers beyond the specs' own resources; shared by plan and apply.
#[derive(Debug, Args)]
pub struct ScopeArgs {
    /// Also delete owned resources that no spec names: on RabbitMQ and Kafka, those inside the
    /// target's ownership prefixes; on SQS, queues and alarms tagged `managed-by: dlqctl` (and
    /// inside the prefixes, if the target declares them). Only targets the specs use; each
    /// delete is listed with its message count, and apply still needs --allow-delete (and
    /// --allow-message-loss for anything not empty).
    #[arg(long)]
    pub prune: bool,

    /// Adopt existing SQS queues and CloudWatch alarms that the specs name but nothing claims
    /// yet (no `managed-by` tag): the plan adds the `managed-by: dlqctl` and `dlqctl-channel`
    /// tags, and changes only settings that differ from the spec. Objects another tool or
    /// another channel claims are never adopted.
    #[arg(long)]
    pub adopt: bool,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Spec files or folders (read recursively: *.yaml, *.yml).
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,

    #[command(flatten)]
    pub spec: SpecArgs,

    #[command(flatten)]
    pub scope: ScopeArgs,

    /// Output format.
    #[arg(long, value_enum, default_value_t = PlanFormat::Human)]
    pub format: PlanFormat,

    /// Save the plan (JSON, with a fingerprint of every live object read) for `dlqctl apply FILE`.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,

    /// Exit 0 when there are no changes, 2 when there are, 1 on error.
    #[arg(long)]
    pub detailed_exitcode: bool,

    /// Print the number of calls made per API to stderr.
    #[arg(long)]
    pub stats: bool,
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// Spec files or folders, or one plan file saved by `dlqctl plan --out`.
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,

    #[command(flatten)]
    pub spec: SpecArgs,

    /// (Not with a saved plan: it already says what it prunes and adopts.)
    #[command(flatten)]
    pub scope: ScopeArgs,

    /// Apply without asking (for automation). Without it, apply asks on a terminal and refuses otherwise.
    #[arg(long)]
    pub auto_approve: bool,

    /// Allow changes that delete and re-create a resource (e.g. a RabbitMQ queue's x-arguments).
    #[arg(long)]
    pub allow_replace: bool,

    /// Allow deleting resources.
    #[arg(long)]
    pub allow_delete: bool,

    /// Allow a replace or delete to drop messages the resource holds. Separate from the flags above on purpose.
    #[arg(long)]
    pub allow_message_loss: bool,

    /// Print the number of calls made per API (the plan's reads and apply's writes) to stderr.
    #[arg(long)]
    pub stats: bool,

    /// Changes (or Kafka requests) in flight at once on each target; targets run side by side. Ordering rules hold at any value; 1 applies one change at a time per target, in plan order.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_PARALLELISM, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=64))]
    pub parallelism: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatusFormat {
    /// For people: a block per channel.
    Human,
    /// The versioned status document (format_version 1; docs/status.md).
    Json,
    /// A pull-request or incident comment.
    Markdown,
    /// Metrics in the text exposition format, for node_exporter's textfile collector.
    Openmetrics,
}

/// How `status` breaks down the dead letters it read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GroupBy {
    /// By error class: the class counts (the default).
    Class,
    /// Also by failure group: the error class and the error message with its numbers, ids,
    /// quoted values and timestamps normalised, each group with a stable id (docs/status.md).
    Fingerprint,
}

/// Which dead letters, by what they say: shared by `status`, `redrive` and `archive`, so a
/// look, a dry run and a move choose the same messages (docs/redrive.md, "Choosing
/// messages").
#[derive(Debug, Args)]
pub struct SelectorArgs {
    /// Only messages of this failure group (repeat for more): the 12-character id `status
    /// --group-by fingerprint` shows.
    #[arg(long = "group", value_name = "ID", value_parser = parse_group)]
    pub groups: Vec<String>,

    /// Only messages for which this jq expression yields true, over a document per message:
    /// {id, body (parsed JSON when it parses, else text), headers, properties, class,
    /// message, attempts, source, ageSeconds, group}; e.g. '.body.region == "eu"'.
    #[arg(long = "where", value_name = "EXPR", value_parser = parse_program)]
    pub where_: Option<String>,
}

/// What to read of each dead-letter queue; shared by status and the exporter.
#[derive(Debug, Args)]
pub struct ReadArgs {
    /// Only this channel (repeat for more); default: every channel of the specs.
    #[arg(long = "channel", value_name = "NAME")]
    pub channels: Vec<String>,

    /// Only the channels of this target (the Targets document's name). A `--channel` name
    /// that two targets have is refused without it.
    #[arg(long = "target", value_name = "NAME")]
    pub target: Option<String>,

    /// Messages read from the head of each dead-letter queue for the error-class counts and
    /// failure groups (at least --samples).
    #[arg(long, value_name = "N", default_value_t = 100,
          value_parser = clap::value_parser!(u16).range(0..=crate::status::MAX_ASKED_SCAN as i64))]
    pub scan: u16,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Spec files or folders (read recursively: *.yaml, *.yml).
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,

    #[command(flatten)]
    pub spec: SpecArgs,

    #[command(flatten)]
    pub read: ReadArgs,

    /// Samples shown per channel: the first N messages read.
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = clap::value_parser!(u16).range(0..=100))]
    pub samples: u16,

    /// Bytes of each body shown; 0 hides bodies.
    #[arg(long, value_name = "BYTES", default_value_t = 1024,
          value_parser = clap::value_parser!(u32).range(0..=1_048_576))]
    pub max_body: u32,

    /// Show headers and bodies as the messages carry them: secret-looking headers
    /// (Authorization, Cookie, *token*, ...), card numbers and the target's `redact` are
    /// hidden unless this is given (prints a warning).
    #[arg(long)]
    pub show_secrets: bool,

    /// Read no message: depth only (and Kafka ages, which need no trace-leaving read).
    #[arg(long)]
    pub no_peek: bool,

    /// SQS: read all of --scan, not one receive of at most 10: as many receives as it takes,
    /// each message hidden for SECS so that no receive hands it out twice, and every one made
    /// visible again when the read ends (within SECS if dlqctl dies). Each message read counts
    /// one receive; refused on a DLQ with a redrive policy of its own (docs/status.md).
    #[arg(long, value_name = "SECS", conflicts_with = "no_peek",
          value_parser = clap::value_parser!(u32).range(1..=43_200))]
    pub hide_for: Option<u32>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = StatusFormat::Human)]
    pub format: StatusFormat,

    /// How the messages read (--scan) are broken down: by error class, or also into failure
    /// groups by fingerprint (human, markdown and JSON; never metrics).
    #[arg(long, value_enum, value_name = "BY", default_value_t = GroupBy::Class)]
    pub group_by: GroupBy,

    #[command(flatten)]
    pub select: SelectorArgs,

    /// Exit 0 when every dead-letter queue is empty, 2 when one holds messages, 1 on error.
    #[arg(long)]
    pub detailed_exitcode: bool,

    /// Print the number of calls made per API to stderr.
    #[arg(long)]
    pub stats: bool,

    /// The audit journal that `redrive` and `archive` append to (`--audit-log`): with it,
    /// each channel's time to resolution — median and p90 of how long the messages that left
    /// its dead-letter queue had waited there — over `--resolution-window`.
    #[arg(long, value_name = "FILE")]
    pub audit_log: Option<PathBuf>,

    /// How far back `--audit-log` is read, e.g. 7d, 30d.
    #[arg(long, value_name = "DURATION", value_parser = parse_age, default_value = "7d", requires = "audit_log")]
    pub resolution_window: std::time::Duration,

    /// The window the dead-letter rate is measured over: messages that entered each
    /// dead-letter queue in the last DURATION against those that entered the channel's
    /// source, as the broker counts them (docs/status.md, "Flow"), e.g. 5m, 1h.
    #[arg(long, value_name = "DURATION", value_parser = parse_age, default_value = "5m")]
    pub rate_window: std::time::Duration,
}

#[derive(Debug, Args)]
pub struct ExporterArgs {
    /// Spec files or folders (read recursively: *.yaml, *.yml).
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,

    #[command(flatten)]
    pub spec: SpecArgs,

    #[command(flatten)]
    pub read: ReadArgs,

    /// Address to serve /metrics on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9464")]
    pub listen: std::net::SocketAddr,

    /// How often the brokers are read (a duration: 30s, 5m); scrapes in between get the last
    /// reading.
    #[arg(long, value_name = "DURATION", default_value = "60s",
          value_parser = parse_interval)]
    pub interval: std::time::Duration,

    /// Also read messages where that leaves a trace (SQS receive, RabbitMQ get-and-requeue),
    /// for their ages and error classes. Off by default: scrapes must not touch dead letters.
    #[arg(long)]
    pub peek: bool,
}

/// A duration of at least one second.
fn parse_interval(text: &str) -> Result<std::time::Duration, String> {
    let d = crate::spec::duration::Duration::parse(text)?;
    let d = std::time::Duration::from_millis(d.as_millis());
    if d < std::time::Duration::from_secs(1) {
        return Err("at least 1s".into());
    }
    Ok(d)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RedriveFormat {
    /// For people.
    Human,
    /// The audit record (format_version 1): selection, counts, times, operator, reason.
    Json,
}

#[derive(Debug, Args)]
pub struct RedriveArgs {
    /// The channel whose dead letters to move (its `metadata.name`).
    pub channel: String,

    /// Spec files or folders (read recursively: *.yaml, *.yml).
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,

    #[command(flatten)]
    pub spec: SpecArgs,

    /// The channel's target (the Targets document's name): required when two targets have
    /// a channel of this name.
    #[arg(long = "target", value_name = "NAME")]
    pub target: Option<String>,

    /// Move at most N messages.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: Option<u64>,

    /// Move at most R messages per second (so the recovering consumer is not flooded); at
    /// least 0.001.
    #[arg(long, value_name = "R", value_parser = parse_rate)]
    pub rate: Option<f64>,

    /// Only messages of this error class (repeat for more): see docs/envelope.md.
    #[arg(long = "class", value_name = "C", value_parser = parse_name)]
    pub classes: Vec<String>,

    /// Only messages dead-lettered (else published) longer ago than this (e.g. 10m, 2h).
    #[arg(long, value_name = "DURATION", value_parser = parse_age)]
    pub older_than: Option<std::time::Duration>,

    #[command(flatten)]
    pub select: SelectorArgs,

    /// Repair each message on its way: a jq program over the same document as --where that
    /// yields the copy's body and headers (e.g. '.body.amount |= tonumber'); ids, routing and
    /// dlq-redrive-count cannot change. A message it fails on stays, and is reported; the dry
    /// run shows each sample's diff (docs/redrive.md, "Repairing messages").
    #[arg(long, value_name = "PROGRAM", conflicts_with = "native", value_parser = parse_program)]
    pub transform: Option<String>,

    /// Where from: `dead-letter` (the channel's dead-letter queue), `invalid` (its
    /// invalid-message queue, `spec.invalid`), `exception` (its Kafka exception-based DLT,
    /// when it has one), or the name of any of these.
    #[arg(long, value_name = "QUEUE", default_value = "dead-letter", value_parser = parse_name)]
    pub from: String,

    /// Where to: `source` (the channel's main queue or topic; through its exchange on
    /// RabbitMQ), `failed-consumer` (only the consumer each message failed in: a reserved
    /// word, see docs/redrive.md; Kafka refuses) or the name of another queue or topic on
    /// the same target. A Pub/Sub or Service Bus topic whose other subscriptions would get
    /// the copies too needs --allow-fanout.
    #[arg(long, value_name = "DEST", default_value = "source", value_parser = parse_name)]
    pub to: String,

    /// Send to the main topic although every subscription of it receives the copies (the
    /// plan lists them): the redrive of a Pub/Sub channel or a Service Bus topic channel
    /// whose main topic has subscriptions other than the channel's own. Without it, refused.
    #[arg(long)]
    pub allow_fanout: bool,

    /// Replay from an archive (a directory, or s3://bucket/prefix) that `dlqctl archive`
    /// wrote, instead of the dead-letter queue: every run's objects are checked against
    /// their manifests and deduplicated (by the broker's message id; on RabbitMQ, by
    /// everything a message carries), then published to the main queue or topic (or --to).
    /// Nothing leaves any queue. The replay writes its ledger into the archive; a next
    /// replay skips what an earlier one published (so --limit continues).
    #[arg(long, value_name = "DIR|S3", value_parser = parse_place,
          conflicts_with_all = ["native", "batch", "verify_for", "health_checks", "health_queries"])]
    pub from_archive: Option<crate::archive::Place>,

    /// With --from-archive: publish again what an earlier replay of the archive published
    /// (or may have: killed, or an answer lost). Without it those are skipped, or, when
    /// unsure, the replay is refused.
    #[arg(long, requires = "from_archive")]
    pub replay_again: bool,

    /// With --from-archive: also read the objects no manifest lists (a manifest missing,
    /// emptied or replaced), their records checked against their own sha256 only. Without
    /// it such an archive is refused, naming them.
    #[arg(long, requires = "from_archive")]
    pub read_unlisted: bool,

    /// Allow `--to` a queue or topic the target does not own (outside its ownership
    /// prefixes; SQS: not tagged by dlqctl; Pub/Sub: not labelled). Without it such a
    /// destination is refused before anything moves.
    #[arg(long)]
    pub allow_unowned_destination: bool,

    /// Show what would move (count, classes, oldest and newest, samples); move nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// SQS: hand the move to SQS's own move task (StartMessageMoveTask, where the endpoint has
    /// it, e.g. AWS): server-side, for a whole standard queue back to its source. The messages
    /// go back as they are: no dlq-redrive-count, no maxRedrives check.
    #[arg(long)]
    pub native: bool,

    /// Move without asking (for automation).
    #[arg(long)]
    pub yes: bool,

    /// Why, for the audit record (`--format json`, `--audit-log`); required by a target
    /// with `operations.requireReason`.
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,

    /// Append the audit record to FILE as one JSON line (created if absent; dry runs too),
    /// fsynced and read back. If it does not land, the command exits 1 naming the file,
    /// whatever moved (the report on stdout still says what).
    #[arg(long, value_name = "FILE")]
    pub audit_log: Option<PathBuf>,

    /// A health gate: this URL (http or https) must answer 2xx (within 5 s) before the first
    /// batch and between batches, or nothing more moves and the command exits 75 (repeatable).
    #[arg(long = "health-check", value_name = "URL", value_parser = parse_gate_url)]
    pub health_checks: Vec<String>,

    /// A health gate: this PromQL query, asked of --prometheus, must return a non-empty
    /// result whose every value is a finite number other than zero (repeatable).
    #[arg(long = "health-query", value_name = "PROMQL", requires = "prometheus")]
    pub health_queries: Vec<String>,

    /// The Prometheus server --health-query asks (its base URL).
    #[arg(long, value_name = "URL", requires = "health_queries", value_parser = parse_gate_url)]
    pub prometheus: Option<String>,

    /// Move in batches of at most N, the health gates asked before each.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub batch: Option<u64>,

    /// With --batch: go on, batch after batch, until a batch finds fewer than it could move.
    #[arg(long, requires = "batch")]
    pub until_empty: bool,

    /// With --batch: wait this long between batches (e.g. 10s).
    #[arg(long, value_name = "DURATION", value_parser = parse_age, requires = "batch")]
    pub pause: Option<std::time::Duration>,

    /// Start no batch after this long overall (e.g. 10m); the batch in flight finishes.
    #[arg(long, value_name = "DURATION", value_parser = parse_age, requires = "batch")]
    pub max_duration: Option<std::time::Duration>,

    /// After each batch, watch the dead-letter queue this long (e.g. 30s) for the moved
    /// messages coming back; more than --max-redead of them back stops the run (exit 1).
    #[arg(long, value_name = "DURATION", value_parser = parse_age)]
    pub verify_for: Option<std::time::Duration>,

    /// With --verify-for: the share of a batch that may come back, in percent (e.g. 5%).
    #[arg(long, value_name = "PERCENT", default_value = "0%", value_parser = parse_percent,
          requires = "verify_for")]
    pub max_redead: f64,

    /// Samples shown by --dry-run.
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = clap::value_parser!(u16).range(0..=100))]
    pub samples: u16,

    /// Show --dry-run's samples as the messages carry them: secret-looking headers, card
    /// numbers and the target's `redact` are hidden unless this is given (prints a warning).
    /// The moved copies are never redacted.
    #[arg(long)]
    pub show_secrets: bool,

    /// Messages --dry-run reads from the head of the dead-letter queue.
    #[arg(long, value_name = "N", default_value_t = 1000,
          value_parser = clap::value_parser!(u16).range(1..=crate::status::MAX_ASKED_SCAN as i64))]
    pub scan: u16,

    /// Output format of the final report.
    #[arg(long, value_enum, default_value_t = RedriveFormat::Human)]
    pub format: RedriveFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ArchiveFormat {
    /// For people.
    Text,
    /// The audit record (format_version 1): selection, counts, objects, manifest, operator.
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Compression {
    Gzip,
}

#[derive(Debug, Args)]
pub struct ArchiveArgs {
    /// The channel whose dead letters to archive (its `metadata.name`).
    pub channel: String,

    /// Spec files or folders (read recursively: *.yaml, *.yml).
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,

    #[command(flatten)]
    pub spec: SpecArgs,

    /// Where: a directory (created if absent) or s3://bucket/prefix. Required, unless --due
    /// finds `deadLetter.archive.to` in the spec (then this one wins).
    #[arg(
        long,
        value_name = "DIR|s3://BUCKET/PREFIX",
        required_unless_present = "due"
    )]
    pub to: Option<String>,

    /// Archive what would expire within `deadLetter.archive.before` (default 2d): dead
    /// letters older than the DLQ's retention minus `before`, their age counted as the
    /// backend's retention counts it (SQS standard queues: from the original enqueue).
    #[arg(long, conflicts_with = "older_than")]
    pub due: bool,

    /// The channel's target (the Targets document's name): required when two targets have
    /// a channel of this name.
    #[arg(long = "target", value_name = "NAME")]
    pub target: Option<String>,

    /// Archive at most N messages.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: Option<u64>,

    /// Read at most R messages per second.
    #[arg(long, value_name = "R", value_parser = parse_rate)]
    pub rate: Option<f64>,

    /// Only messages of this error class (repeat for more): see docs/envelope.md.
    #[arg(long = "class", value_name = "C", value_parser = parse_name)]
    pub classes: Vec<String>,

    /// Only messages dead-lettered (else published) longer ago than this (e.g. 7d, 12h).
    #[arg(long, value_name = "DURATION", value_parser = parse_age)]
    pub older_than: Option<std::time::Duration>,

    #[command(flatten)]
    pub select: SelectorArgs,

    /// Remove each archived message from the dead-letter queue once its object is durable
    /// and listed in the manifest. Without it nothing is removed.
    #[arg(long)]
    pub delete: bool,

    /// With --delete: remove without asking (for automation).
    #[arg(long)]
    pub yes: bool,

    /// Show what would be archived; read nothing out, write nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Compress each object (`.jsonl.gz`).
    #[arg(long, value_enum, value_name = "ALGORITHM")]
    pub compress: Option<Compression>,

    /// Why, for the audit record (`--format json`, `--audit-log`, the manifest); required
    /// by a target with `operations.requireReason`.
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,

    /// Append the audit record to FILE as one JSON line (created if absent; dry runs too),
    /// fsynced and read back. If it does not land, the command exits 1 naming the file.
    #[arg(long, value_name = "FILE")]
    pub audit_log: Option<PathBuf>,

    /// Output format of the final report.
    #[arg(long, value_enum, default_value_t = ArchiveFormat::Text)]
    pub format: ArchiveFormat,
}

fn parse_place(text: &str) -> Result<crate::archive::Place, String> {
    crate::archive::Place::parse(text)
}

/// The slowest `--rate` honoured: one message every 1,000 seconds. Below it a rate is a
/// typo or an attack (`1e-300` would wait longer than any clock can count; issue 52).
pub const MIN_RATE: f64 = 0.001;

fn parse_rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(r) if r >= MIN_RATE && r.is_finite() => Ok(r),
        _ => Err(format!(
            "a number of messages per second, at least {MIN_RATE} (one every 1,000 s), e.g. 50 or 0.5"
        )),
    }
}

/// A `--health-check` or `--prometheus` URL: http or https with a host (issue 52: a typo was
/// "unhealthy", exit 75, forever).
fn parse_gate_url(text: &str) -> Result<String, String> {
    const HINT: &str =
        "an http:// or https:// URL with a host, e.g. http://orders-api.internal/healthz";
    let u = reqwest::Url::parse(text.trim()).map_err(|e| format!("{e}: {HINT}"))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(format!("the scheme is `{}`: {HINT}", u.scheme()));
    }
    if u.host_str().is_none_or(str::is_empty) {
        return Err(format!("no host: {HINT}"));
    }
    if u.port() == Some(0) {
        return Err(format!("port 0 is no port to ask: {HINT}"));
    }
    Ok(text.trim().to_owned())
}

/// A failure group's id (`--group`): the 12 hexadecimal characters `status --group-by
/// fingerprint` shows (any case; kept lower case). An empty or malformed one is a usage
/// error (issue 52), not a failure of the run.
fn parse_group(text: &str) -> Result<String, String> {
    /// `status::fingerprint::ID_LEN` (the command line imports nothing below it).
    const ID_LEN: usize = 12;
    let id = text.trim().to_ascii_lowercase();
    if id.len() != ID_LEN || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "a failure group's id is {ID_LEN} hexadecimal characters, as `dlqctl status --group-by fingerprint` shows it"
        ));
    }
    Ok(id)
}

/// A jq program (`--where`, `--transform`) that is not empty or blank: it compiles later,
/// where its errors name the column.
fn parse_program(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        Err("must not be empty: a jq program (docs/redrive.md, \"Choosing messages\")".to_owned())
    } else {
        Ok(text.to_owned())
    }
}

/// A name (`--class`, `--to`, `--from`) that is not empty or blank: an empty one selected
/// nothing, or nowhere, without a word (issue 52).
fn parse_name(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        Err("must not be empty".to_owned())
    } else {
        Ok(text.to_owned())
    }
}

/// `5%` or `5`: a share in percent, 0 to 100.
fn parse_percent(text: &str) -> Result<f64, String> {
    let n: f64 = text
        .trim()
        .trim_end_matches('%')
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a percentage (e.g. 5%)"))?;
    if (0.0..=100.0).contains(&n) {
        Ok(n)
    } else {
        Err(format!("`{text}`: a percentage is between 0% and 100%"))
    }
}

fn parse_age(text: &str) -> Result<std::time::Duration, String> {
    let d = crate::spec::duration::Duration::parse(text)?;
    Ok(std::time::Duration::from_millis(d.as_millis()))
}
