//! AWS Lambda as the deployed stack runs nodewright's three functions, emulated around
//! their real binaries: execution environments, the timeout, reserved concurrency
//! ([`function`]); asynchronous invocation with its retries and event age, EventBridge
//! Scheduler's rate schedules ([`asynchronous`]); the SQS event source mapping with partial
//! batch responses ([`esm`]); and recursive loop detection ([`lineage`]). Every setting
//! comes from the deployed template ([`settings`]), so the template is what is tested.
//!
//! Time is the world's ([`crate::world_time`]): a function's 60 s timeout is 60 s of world
//! time, and its binary keeps the world's time too (`NODEWRIGHT_CLOCK`). A function's
//! requests to AWS and to the API server count as the world working; the time it computes
//! between them does not (an invocation that waits on an injected delay must let the
//! world's time run on).

pub mod asynchronous;
pub mod esm;
pub mod function;
pub mod lineage;
pub mod metrics;
pub mod settings;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use serde_json::json;
use tokio::task::JoinHandle;

pub use asynchronous::{AsyncInvoker, EventFate};
pub use esm::EventSourceMapping;
pub use function::{Function, Outcome, Record, max_concurrency};
pub use settings::{FunctionSettings, RecursiveLoop};

use crate::world::World;

/// The functions of the deployed stack, running.
pub struct Lambda {
    pub functions: BTreeMap<String, Arc<Function>>,
    pub invokers: BTreeMap<String, Arc<AsyncInvoker>>,
    pub mappings: BTreeMap<String, Arc<EventSourceMapping>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Lambda {
    /// Deploys each `(logical id, binary)` of the stack as Lambda would: environments start
    /// on first use; nothing is invoked until [`Lambda::start_triggers`].
    pub fn deploy(
        world: &World,
        binaries: &[(&str, PathBuf)],
        dir: &std::path::Path,
        changes: impl Fn(&mut FunctionSettings),
    ) -> anyhow::Result<Lambda> {
        let template = world
            .stack
            .deployed
            .template
            .as_ref()
            .context("the deployed stack carries no template")?;
        let mut functions = BTreeMap::new();
        let mut invokers = BTreeMap::new();
        for (logical_id, binary) in binaries {
            let mut settings = FunctionSettings::read(template, logical_id)?;
            changes(&mut settings);
            let env = world.binary_env(logical_id, dir)?;
            let function = Arc::new(Function::new(
                settings,
                binary.clone(),
                env,
                dir.to_path_buf(),
                world.clock(),
            ));
            invokers.insert(
                logical_id.to_string(),
                AsyncInvoker::new(function.clone(), world.clock()),
            );
            functions.insert(logical_id.to_string(), function);
        }
        Ok(Lambda {
            functions,
            invokers,
            mappings: BTreeMap::new(),
            tasks: Vec::new(),
        })
    }

    pub fn function(&self, logical_id: &str) -> anyhow::Result<&Arc<Function>> {
        self.functions
            .get(logical_id)
            .with_context(|| format!("{logical_id} is not deployed in this world"))
    }

    /// Starts what invokes the functions: each schedule and each SQS event source mapping.
    /// (EventBridge's deliveries reach the world's queue as the world sends them:
    /// `World::put_event`.)
    pub fn start_triggers(&mut self, world: &World) {
        for (id, function) in &self.functions {
            if let Some(every) = function.settings.schedule
                && let Some(invoker) = self.invokers.get(id)
            {
                let (invoker, clock) = (invoker.clone(), world.clock());
                self.tasks.push(tokio::spawn(async move {
                    loop {
                        // EventBridge Scheduler's payload for a target with no Input.
                        invoker.submit(json!({}));
                        clock.sleep(every).await;
                    }
                }));
            }
            if function.settings.queue.is_some() {
                let mapping = EventSourceMapping::new(
                    function.clone(),
                    world.queue.clone(),
                    crate::moto::REGION,
                    world.clock(),
                );
                self.tasks.push(tokio::spawn(mapping.clone().run()));
                self.mappings.insert(id.clone(), mapping);
            }
        }
    }

    /// Puts every invocation so far into CloudWatch as Lambda's own metrics, under each
    /// function's deployed name ([`metrics`]). Once per world: the sums are added to what
    /// CloudWatch holds, so a second call would count every invocation twice.
    pub async fn publish_metrics(&self, world: &World) -> anyhow::Result<()> {
        let cloudwatch = aws_sdk_cloudwatch::Client::new(&world.sdk);
        for (logical_id, function) in &self.functions {
            let name = &world.stack.deployed.function(logical_id)?.name;
            metrics::publish(&cloudwatch, name, &function.records()).await?;
        }
        Ok(())
    }

    /// Stops the triggers and ends every environment.
    pub fn stop(&mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
        for f in self.functions.values() {
            f.shut_down();
        }
    }
}

impl Drop for Lambda {
    fn drop(&mut self) {
        self.stop();
    }
}
