//! The seam between the record and A/B loops and the samples they run: a [`SampleRunner`]
//! takes a plan and gives back the sample's result. The real one runs a fresh
//! `vaultbench sample` subprocess; the loops' tests use a scripted one (as hyperfine's
//! `Executor` and `MockExecutor` split running a command from the benchmark loop).

use std::path::PathBuf;
use std::time::Duration;

use reports::schema::SampleResult;

use crate::sample::plan::SamplePlan;

/// Runs one sample. An `Err` is a failed sample (its cause named); an
/// [`Interrupted`](crate::interrupt::Interrupted) error stops the loop that called it.
pub trait SampleRunner {
    fn run(&self, plan: &SamplePlan) -> anyhow::Result<SampleResult>;
}

/// Each sample in a fresh `vaultbench sample` process, its plan written under `work`, bounded
/// by `timeout`.
pub struct SubprocessRunner {
    pub work: PathBuf,
    pub timeout: Duration,
}

impl SampleRunner for SubprocessRunner {
    fn run(&self, plan: &SamplePlan) -> anyhow::Result<SampleResult> {
        crate::sample::parent::run_sample(plan, &self.work, self.timeout)
    }
}

/// A scripted runner for the loops' unit tests: each call takes the next step of the script
/// and answers with a sample document built from the plan, or the scripted failure.
#[cfg(test)]
pub mod mock {
    use std::cell::RefCell;
    use std::collections::{BTreeMap, VecDeque};
    use std::path::PathBuf;
    use std::time::Duration;

    use reports::schema::{Better, ChannelReading, Metric, SampleResult};

    use super::SampleRunner;
    use crate::prepare::Prepared;
    use crate::sample::plan::SamplePlan;

    /// What one call answers.
    #[derive(Debug, Clone)]
    pub enum Step {
        /// A sample whose timing key `t.ms` is `t`, exact key `n.count` is `n`, and whose two
        /// calibration readings are `cpu` ms (io 1 ms); a non-positive `cpu` makes the gate refuse.
        Sample { t: f64, n: f64, cpu: f64 },
        /// A failed sample with this cause.
        Fail(&'static str),
        /// Ctrl-C during the sample.
        Interrupt,
    }

    /// An accepted sample with timing `t` and exact count 3.
    pub fn ok(t: f64) -> Step {
        Step::Sample {
            t,
            n: 3.0,
            cpu: 1.0,
        }
    }

    /// A sample the gate refuses (a non-positive cpu reading).
    pub fn noisy(t: f64) -> Step {
        Step::Sample {
            t,
            n: 3.0,
            cpu: 0.0,
        }
    }

    /// One call as the loop made it: (plan index, warm-up, target as given).
    pub type Call = (u32, bool, String);

    #[derive(Default)]
    pub struct MockRunner {
        script: RefCell<VecDeque<Step>>,
        pub calls: RefCell<Vec<Call>>,
    }

    impl MockRunner {
        pub fn new(steps: impl IntoIterator<Item = Step>) -> MockRunner {
            MockRunner {
                script: RefCell::new(steps.into_iter().collect()),
                calls: RefCell::new(Vec::new()),
            }
        }

        /// Steps the loop did not use.
        pub fn left(&self) -> usize {
            self.script.borrow().len()
        }
    }

    impl SampleRunner for MockRunner {
        fn run(&self, plan: &SamplePlan) -> anyhow::Result<SampleResult> {
            self.calls
                .borrow_mut()
                .push((plan.index, plan.warmup, plan.target.given.clone()));
            let step = self
                .script
                .borrow_mut()
                .pop_front()
                .ok_or_else(|| anyhow::anyhow!("the script ran out at plan {}", plan.index))?;
            let (t, n, cpu) = match step {
                Step::Sample { t, n, cpu } => (t, n, cpu),
                Step::Fail(cause) => anyhow::bail!("{cause}"),
                Step::Interrupt => return Err(crate::interrupt::Interrupted.into()),
            };
            Ok(SampleResult {
                metrics: BTreeMap::from([
                    ("t.ms".to_owned(), Metric::timing(t, "ms", Better::Lower)),
                    ("n.count".to_owned(), Metric::exact(n, "count")),
                ]),
                calibration: vec![
                    ChannelReading {
                        cpu_ms: cpu,
                        io_ms: 1.0,
                        rtt_ms: Some(1.0),
                    };
                    2
                ],
                ..SampleResult::started(
                    plan.scenario.name.clone(),
                    plan.index,
                    plan.warmup,
                    (1000 + plan.index, 2000 + plan.index),
                    plan.vault_digest.clone(),
                )
            })
        }
    }

    /// A prepared run that needs no vault on disk (the mock never reads it): the built-in
    /// `small` scenario, default gate thresholds, no calibration reference.
    pub fn prepared() -> Prepared {
        let work = tempfile::tempdir().expect("temp dir");
        let fingerprint = calibration::fingerprint(work.path());
        Prepared {
            scenario: scenarios::scenario::builtin("small").expect("built-in scenario"),
            seed: 7,
            vault_dir: PathBuf::from("/nonexistent-vault"),
            user_vault: None,
            vault_digest: "digest".into(),
            work,
            gate_cfg: <calibration::GateConfig as calibration::GateFile>::load(None)
                .expect("default gate"),
            reference: None,
            reference_file: Some(PathBuf::from("/nonexistent-reference.json")),
            fingerprint,
            timeout: Duration::from_secs(1),
            phase_timeout: crate::sample::plan::DEFAULT_PHASE_TIMEOUT,
            no_pin: false,
            cost: None,
            keep_profiles: None,
            retry_pause: Duration::ZERO,
            pre_check: Duration::ZERO,
            wait_quiet: None,
        }
    }
}
