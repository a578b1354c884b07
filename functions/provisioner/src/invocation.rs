//! The executor of [`super::machine`]: one invocation's Lease, pod watch and summary, and
//! the I/O of each action (check the Lease, warm up, poll, refresh, wait). It decides
//! nothing the machine could; it reports what happened as the machine's events.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use jiff::Timestamp;
use lambda_runtime::{Context, Error};
use nodewright::clock::Clock;
use nodewright::ids::InstanceId;
use nodewright::lease::{Elector, Hold, KubeLeases, MayAct};
use nodewright::provision::{PollReport, ProvisionError, Turn};
use nodewright::telemetry::{self, Decision};
use serde_json::Value;

use super::machine::{Action, Event, LeaseCheck, Settings, State as Machine, TurnStart};
use super::summary::Summary;
use super::wakes::PodWakes;
use super::{State, coverage, deadline, standby};

/// One invocation in progress.
pub(crate) struct Invocation<'s, K, A> {
    state: &'s State<K, A>,
    clock: Arc<dyn Clock>,
    elector: Option<Arc<Elector<KubeLeases>>>,
    gate: Option<coverage::InvocationGate>,
    deadline: Option<Timestamp>,
    until: Timestamp,
    wakes: PodWakes,
    summary: Summary,
}

impl<'s, K, A> Invocation<'s, K, A>
where
    K: nodewright::kube::Cluster + nodewright::kube::PendingPodWatch,
    A: nodewright::aws::Cloud + nodewright::aws::OnDemandPriceSource,
{
    /// Reads the invocation's deadline, names its Lease contender and opens its pod watch.
    pub(crate) async fn begin(context: &Context, state: &'s State<K, A>) -> Self {
        let clock = state.clock.clone();
        let started = clock.now();
        let margin = state.coverage.deadline_margin;
        let deadline = deadline::deadline_of(context.deadline);
        let working = deadline::working_time(started, state.config.budget, deadline, margin);
        let request_id = &context.request_id;
        tracing::debug!(request_id, ?working, "provisioner invoked");
        let elector = state.lease.as_ref().map(|l| {
            Arc::new(Elector::new(
                l.store.clone(),
                &state.coverage.lease_name,
                &format!("{}/{request_id}", l.container),
                state.coverage.lease_duration,
            ))
        });
        let gate = elector.clone().map(|elector| coverage::InvocationGate {
            elector,
            clock: clock.clone(),
        });
        let mut summary = Summary::default();
        summary.lease.identity = elector.as_ref().map(|e| e.identity().to_string());
        let watch = state
            .provisioner
            .lock()
            .await
            .kube()
            .watch_pending(working)
            .await;
        Invocation {
            state,
            wakes: PodWakes::from(watch, clock.clone()),
            clock,
            elector,
            gate,
            deadline,
            until: started + working,
            summary,
        }
    }

    /// What the machine needs to know of this invocation.
    pub(crate) fn settings(&self) -> Settings {
        Settings {
            poll_interval: self.state.config.poll_interval,
            renew_every: self
                .elector
                .as_ref()
                .map(|_| self.state.coverage.renew_every()),
            standby_recheck: coverage::STANDBY_RECHECK,
            until: self.until,
        }
    }

    /// Does `action`; what came of it, or `None` once the machine says finish.
    pub(crate) async fn act(
        &mut self,
        action: Action,
        machine: &Machine,
        settings: &Settings,
    ) -> Option<Event> {
        Some(match action {
            Action::Finish => return None,
            Action::CheckLease => Event::Lease(self.check_lease(machine.turn.is_some()).await),
            Action::WarmUp { prices } => {
                self.warm_up(prices, settings).await;
                Event::WarmedUp
            }
            Action::Poll => Event::Polled {
                waiting: self.poll(machine).await,
            },
            Action::Refresh { holder: false, .. } => Event::Refreshed {
                ran: standby::list_standing_by(&self.state.provisioner).await,
                prices_checked: false,
                woken: false,
            },
            Action::Refresh {
                holder: true,
                prices,
                watch,
            } => self.refresh(machine, prices, watch).await,
            Action::Wait { until, watch } => Event::Waited {
                woken: self.wakes.wait(until, watch).await,
            },
        })
    }

    async fn check_lease(&mut self, holding: bool) -> LeaseCheck {
        let Some(elector) = &self.elector else {
            return LeaseCheck::Held(TurnStart {
                since: self.clock.now(),
                named: vec![],
            });
        };
        match elector.hold(SystemTime::from(self.clock.now())).await {
            Ok(Hold::Held { how, earlier, .. }) => {
                if !holding {
                    self.summary.lease.acquired += 1;
                    tracing::info!(identity = elector.identity(), ?how, "holding the Lease");
                }
                LeaseCheck::Held(TurnStart {
                    since: Timestamp::try_from(earlier.since).unwrap_or_else(|_| self.clock.now()),
                    named: earlier.ids().filter_map(InstanceId::parse).collect(),
                })
            }
            Ok(Hold::Waiting { holder, until }) => {
                if holding {
                    tracing::warn!(holder, "the Lease was taken over; standing by");
                }
                self.summary.lease.standby_checks += 1;
                tracing::debug!(holder, ?until, "another invocation holds the Lease");
                LeaseCheck::Waiting
            }
            Err(e) => {
                self.summary.lease.failed_checks += 1;
                let chain = nodewright::error_chain(&e);
                tracing::warn!(error = chain, "checking the Lease failed; not acting");
                self.summary.last_error = Some(chain);
                LeaseCheck::Failed
            }
        }
    }

    /// Standing by: build now what the first poll as holder would otherwise build with
    /// pods pending (a cold container's catalog; a warm one's refresh ahead of its TTL),
    /// and fetch on-demand prices when due, so that taking over costs nothing; dropped
    /// the moment the Lease is this invocation's.
    async fn warm_up(&mut self, prices: bool, settings: &Settings) {
        let Some(elector) = &self.elector else {
            return;
        };
        let started = self.clock.now();
        let outcome = standby::warm_while_standing_by(
            &self.state.provisioner,
            elector,
            settings.standby_recheck.min(settings.poll_interval),
            self.until,
            prices,
        )
        .await;
        let ms = self.clock.now().duration_since(started).as_millis();
        self.summary.lease.warm_up = Some((outcome, u128::try_from(ms).unwrap_or(0)));
    }

    fn turn<'a>(&'a self, machine: &'a Machine) -> Turn<'a> {
        turn_of(
            machine,
            self.gate.as_ref(),
            self.deadline,
            self.state.coverage.deadline_margin,
        )
    }

    /// One poll; the batching window's remaining time, if open.
    async fn poll(&mut self, machine: &Machine) -> Option<Duration> {
        // Pod events so far are covered by the list this poll is about to make; later
        // ones (during the poll) stay queued and wake the next one.
        self.wakes.drain();
        self.summary.polls += 1;
        let turn = self.turn(machine);
        let started = self.clock.now();
        let now = SystemTime::from(started);
        let poll = async { self.state.provisioner.lock().await.poll(&turn, now).await };
        // A poll can outlast the Lease (a cold container builds its catalog first): the
        // Lease is renewed meanwhile, so the other invocation does not take over a holder
        // that is working (the check before each launch still decides).
        let result: Result<PollReport, ProvisionError> = coverage::while_holding(
            self.elector.as_deref(),
            self.state.coverage.renew_every(),
            self.clock.as_ref(),
            poll,
        )
        .await;
        let took = Duration::try_from(self.clock.now().duration_since(started)).ok();
        let waiting = match result {
            Ok(report) => {
                self.polled(&report, took);
                report.waiting
            }
            Err(e) => {
                self.summary.failed_polls += 1;
                let chain = nodewright::error_chain(&e);
                tracing::error!(error = chain, "poll failed");
                self.summary.last_error = Some(chain);
                None
            }
        };
        // Per poll, so a long invocation's latencies stay within one document's 100 values.
        telemetry::flush();
        waiting
    }

    fn polled(&mut self, report: &PollReport, took: Option<Duration>) {
        telemetry::pending_pods(report.pending_pods, report.oldest_pending);
        // A poll that planned (pods pending, batching window closed) is a decision.
        if let (true, None, Some(took)) = (report.pending_pods > 0, report.waiting, took) {
            telemetry::decision_latency(Decision::Provision, took);
        }
        self.summary.add(report);
        if let Some(elector) = &self.elector {
            // Whoever takes the Lease next learns of this holder's launches, answered by now.
            elector.note_launches(
                &report.launched_instances,
                SystemTime::from(self.clock.now()),
            );
        }
        if !report.launched_instances.is_empty()
            || report.unschedulable_pods > 0
            || report.withheld.is_some()
        {
            tracing::info!(?report, "poll");
        }
    }

    /// The holder's refresh between polls (see [`standby::refresh_between_polls`]),
    /// dropped when a pod wakes it or at the end of the working time.
    async fn refresh(&mut self, machine: &Machine, prices: bool, watch: bool) -> Event {
        let watching = watch && self.wakes.watching();
        let turn = turn_of(
            machine,
            self.gate.as_ref(),
            self.deadline,
            self.state.coverage.deadline_margin,
        );
        let mut early = false;
        let until = self.until;
        let wakes = &mut self.wakes;
        let woken_by_pod = async {
            early = wakes.wake_or_end(until, watching).await;
        };
        let refresh =
            standby::refresh_between_polls(&self.state.provisioner, &turn, woken_by_pod, prices);
        // Longer than the Lease at worst (PRICE_FETCH_TIMEOUT): renewed meanwhile.
        let between = coverage::while_holding(
            self.elector.as_deref(),
            self.state.coverage.renew_every(),
            self.clock.as_ref(),
            refresh,
        )
        .await;
        // A wake the refresh cut short (its event taken, the coalescing not over) still
        // counts: the pod's poll must not wait for the next interval.
        let woken = early | self.wakes.take_woken();
        Event::Refreshed {
            ran: between.ran,
            prices_checked: between.prices_checked,
            woken,
        }
    }

    /// Releases the Lease, reports the fleet's cost (an invocation that acted), and
    /// answers with the summary; an error when errors kept it from doing anything
    /// ([`Summary::failure`]).
    pub(crate) async fn finish(mut self) -> Result<Value, Error> {
        if let Some(elector) = &self.elector {
            match elector.release(SystemTime::from(self.clock.now())).await {
                Ok(released) => self.summary.lease.released = released,
                Err(e) => tracing::warn!(
                    error = nodewright::error_chain(&e),
                    "releasing the Lease failed; the next invocation takes it when it expires"
                ),
            }
        }
        self.summary.watch = self.wakes.state;
        self.summary.wakeups = self.wakes.count;
        // Only an invocation that acted reports the fleet: a standby one would list the
        // same instances again for the same figure.
        if self.summary.polls > 0 {
            self.report_fleet_cost().await;
        }
        telemetry::flush();
        if let Some(failure) = self.summary.failure() {
            return Err(failure.into());
        }
        Ok(self.summary.json())
    }

    async fn report_fleet_cost(&mut self) {
        let now = SystemTime::from(self.clock.now());
        let cost = self.state.provisioner.lock().await.fleet_cost(now).await;
        match cost {
            Ok(cost) => {
                telemetry::fleet(cost.per_hour, cost.instances);
                self.summary.fleet_cost_per_hour = Some(cost.per_hour);
                if !cost.unpriced.is_empty() {
                    tracing::warn!(instances = ?cost.unpriced, "no price for these instances; the fleet's cost leaves them out");
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "listing owned instances for the fleet's cost failed")
            }
        }
    }
}

/// A poll's turn: since when its listing holds the earlier holders' launches, the time it
/// launches by (`margin` before the deadline), its Lease gate.
fn turn_of<'g>(
    machine: &'g Machine,
    gate: Option<&'g coverage::InvocationGate>,
    deadline: Option<Timestamp>,
    margin: Duration,
) -> Turn<'g> {
    Turn {
        since: machine.turn.as_ref().map(|t| SystemTime::from(t.since)),
        named: machine.turn.as_ref().map_or(&[], |t| t.named.as_slice()),
        launch_by: deadline::launch_by(deadline, margin).map(SystemTime::from),
        gate: gate.map(|g| g as &dyn MayAct),
    }
}
