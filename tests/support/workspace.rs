//! The face every live fixture shares: a temp folder with a targets file (the example one,
//! pointed at the given endpoints) and one channel under a random name, run through the real
//! binary with the local stack's credentials.

use std::path::{Path, PathBuf};

use super::{Output, dlqctl, output, unique};

/// Where the targets file points: the local stack's endpoints unless a test says otherwise
/// (a fault-injecting proxy, a closed port).
#[derive(Debug, Clone)]
pub struct Endpoints {
    pub rabbitmq: String,
    pub aws: String,
    pub kafka: String,
    pub pubsub: String,
}

impl Default for Endpoints {
    fn default() -> Self {
        Endpoints {
            rabbitmq: super::rabbitmq_url(),
            aws: super::aws_endpoint(),
            kafka: super::kafka_bootstrap(),
            pubsub: super::pubsub_host(),
        }
    }
}

/// Per-test workspace: `dlqctl.yaml` and a channel spec written as `channel.yaml`.
pub struct Workspace {
    pub dir: tempfile::TempDir,
    /// The channel's name, `<prefix><pid>-<time>-<n>`.
    pub channel: String,
    /// Environment for the binary: the local stack's credentials unless a test changes them.
    pub env: Vec<(String, String)>,
    /// The example `write_example` writes.
    example: &'static str,
}

impl Workspace {
    /// `dlqctl ARGS --color never` with this workspace's environment, run in its folder, not
    /// started: for a test that sets the streams itself.
    pub fn command(&self, args: &[&str]) -> std::process::Command {
        let mut c = dlqctl();
        c.args(args)
            .args(["--color", "never"])
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(self.path());
        c
    }

    /// [`Workspace::command`] started in the background, stdout discarded, stderr piped (read
    /// it as it comes, or the run may block on a full pipe): for tests that act while it runs
    /// (interrupt it, change the live state under it, read what it announces).
    pub fn spawn(&self, args: &[&str]) -> std::process::Child {
        self.command(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("dlqctl {args:?} starts: {e}"))
    }

    /// `dlqctl apply channel.yaml --auto-approve` through [`Workspace::spawn`].
    pub fn spawn_apply(&self) -> std::process::Child {
        self.spawn(&["apply", "channel.yaml", "--auto-approve"])
    }

    /// A workspace for `example`, its channel renamed to a fresh `<prefix>…` name. Checks
    /// nothing: the fixtures check that their server answers first.
    pub fn new(example: &'static str, prefix: &str, endpoints: &Endpoints) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let targets = std::fs::read_to_string(super::root().join("examples/dlqctl.yaml"))
            .expect("examples/dlqctl.yaml")
            .replace(
                "${DLQCTL_RABBITMQ_URL:-http://127.0.0.1:15672}",
                &endpoints.rabbitmq,
            )
            .replace(
                "${DLQCTL_AWS_ENDPOINT:-http://127.0.0.1:5000}",
                &endpoints.aws,
            )
            .replace(
                "bootstrapServers: ${DLQCTL_KAFKA_BOOTSTRAP:-127.0.0.1:9092}",
                &format!("bootstrapServers: {}", endpoints.kafka),
            )
            .replace("${PUBSUB_EMULATOR_HOST:-127.0.0.1:8085}", &endpoints.pubsub);
        std::fs::write(dir.path().join("dlqctl.yaml"), targets).expect("write targets");
        Workspace {
            dir,
            channel: unique(prefix),
            env: super::local_env(),
            example,
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes this workspace's example as `channel.yaml`, with its channel name and `edit`.
    pub fn write_example(&self, edit: impl Fn(String) -> String) -> PathBuf {
        self.write_from(self.example, edit)
    }

    /// Writes another example (a file name under `examples/`) as `channel.yaml`, with this
    /// workspace's channel name and `edit`.
    pub fn write_from(&self, example: &str, edit: impl Fn(String) -> String) -> PathBuf {
        let text = renamed(example, &self.channel);
        let path = self.path().join("channel.yaml");
        std::fs::write(&path, edit(text)).expect("write spec");
        path
    }

    /// Edits the targets file in place.
    pub fn edit_targets(&self, edit: impl Fn(String) -> String) {
        let path = self.path().join("dlqctl.yaml");
        let text = std::fs::read_to_string(&path).expect("targets");
        std::fs::write(&path, edit(text)).expect("write targets");
    }

    pub fn run(&self, args: &[&str]) -> Output {
        output(&mut self.command(args))
    }

    /// Sets (or replaces) one variable of the binary's environment.
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_owned(), value.to_owned()));
    }

    pub fn plan(&self) -> Output {
        self.run(&["plan", "channel.yaml", "--detailed-exitcode"])
    }

    pub fn apply(&self, extra: &[&str]) -> Output {
        let mut args = vec!["apply", "channel.yaml", "--auto-approve"];
        args.extend_from_slice(extra);
        self.run(&args)
    }

    /// Writes the example with `edit`, then plans it.
    pub fn plan_edited(&self, edit: impl Fn(String) -> String) -> Output {
        self.write_example(edit);
        self.plan()
    }

    /// `plan channel.yaml --out plan.json`, which must succeed.
    pub fn save_plan(&self) -> Output {
        let p = self.run(&["plan", "channel.yaml", "--out", "plan.json"]);
        p.ok();
        p
    }

    /// The first apply of a fresh channel: the plan has changes (exit 2), apply succeeds,
    /// then the plan is empty. Returns the plan and the apply.
    pub fn first_apply(&self, context: &str) -> (Output, Output) {
        let first = self.plan();
        assert_eq!(
            first.code, 2,
            "{context}: a fresh channel has changes\n{}{}",
            first.stdout, first.stderr
        );
        let a = self.apply(&[]);
        a.ok_with(context);
        self.assert_empty_plan(&format!("{context} after apply"));
        (first, a)
    }

    /// Applying again changes nothing and makes no writes.
    pub fn assert_second_apply_writes_nothing(&self, context: &str) {
        let again = self.apply(&[]);
        again.ok_with(context).assert_stdout_contains("No changes.");
        assert!(
            !again.stderr.contains("[1/"),
            "{context}: a second apply makes no writes\n{}",
            again.stderr
        );
    }

    /// A guarded replace: apply is refused for want of `--allow-replace`, then, with it, for
    /// message loss; returns the second refusal.
    pub fn apply_refused_replace(&self) -> Output {
        let refused = self.apply(&[]);
        assert_eq!(refused.code, 1);
        refused.assert_stderr_contains("--allow-replace");
        let refused = self.apply(&["--allow-replace"]);
        assert_eq!(
            refused.code, 1,
            "replace allowed, message loss not\n{}",
            refused.stderr
        );
        refused
    }

    /// `plan channel.yaml --prune --format json`, which must plan (exit 0 or 2): the names of
    /// the resources it would delete, and the output (to show with a failed assertion).
    pub fn prune_plan(&self) -> (Vec<String>, Output) {
        let p = self.run(&["plan", "channel.yaml", "--prune", "--format", "json"]);
        assert!(p.code == 0 || p.code == 2, "{}{}", p.stdout, p.stderr);
        let deleted = p.json("plan JSON")["changes"]
            .as_array()
            .expect("changes")
            .iter()
            .filter(|c| c["action"] == "delete")
            .filter_map(|c| c["resource"]["name"].as_str().map(str::to_owned))
            .collect();
        (deleted, p)
    }

    /// The channel's plan is empty: exit 0 with `--detailed-exitcode`, and "No changes.".
    pub fn assert_empty_plan(&self, context: &str) {
        self.assert_empty_plan_of(&["channel.yaml"], &[], context, String::new);
    }

    /// `plan <paths> --detailed-exitcode <extra>` is empty; `detail` adds to the message.
    pub fn assert_empty_plan_of(
        &self,
        paths: &[&str],
        extra: &[&str],
        context: &str,
        detail: impl Fn() -> String,
    ) {
        let mut args = vec!["plan"];
        args.extend_from_slice(paths);
        args.push("--detailed-exitcode");
        args.extend_from_slice(extra);
        let p = self.run(&args);
        assert_eq!(
            p.code,
            0,
            "{context}: plan must be empty (exit 0)\n{}{}\n{}",
            p.stdout,
            p.stderr,
            detail()
        );
        assert!(p.stdout.contains("No changes."), "{context}\n{}", p.stdout);
    }
}

/// An example's text with its channel (`metadata.name`, the first `  name:` line: metadata
/// comes before spec in every example) renamed to `channel`.
pub fn renamed(example: &str, channel: &str) -> String {
    let text = std::fs::read_to_string(super::root().join("examples").join(example))
        .unwrap_or_else(|e| panic!("examples/{example}: {e}"));
    let line = text
        .lines()
        .find(|l| l.starts_with("  name: "))
        .expect("metadata.name")
        .to_owned();
    text.replacen(&line, &format!("  name: {channel}"), 1)
}
