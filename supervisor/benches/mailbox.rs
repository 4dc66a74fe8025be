//! The cost of supervision on the message path: the same actor reached through a supervised,
//! instrumented `Mailbox` and through a plain actix `Addr`, both on another arbiter's thread.
//!
//! - `round_trip`: one request and its reply, awaited before the next.
//! - `throughput`: a stream of fire-and-forget messages, then one request to wait for them all.
//!
//! Run: `cargo bench -p nodepulse-supervisor --bench mailbox`.

// A benchmark measures real wall time across threads; the crate's one-clock ban is for actor code.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::time::{Duration, Instant};

use actix::{Actor, Addr, Arbiter, Context, Handler, Message, SystemRunner};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use nodepulse_supervisor::{
    ChildSpec, Mailbox, SupervisedActor, Supervisor, SupervisorConfig, mailbox,
};

#[derive(Default)]
struct Counter {
    count: u64,
}

impl Actor for Counter {
    type Context = Context<Self>;
}

impl SupervisedActor for Counter {}

#[derive(Message)]
#[rtype(result = "()")]
struct Increment;

#[derive(Message)]
#[rtype(result = "u64")]
struct Get;

impl Handler<Increment> for Counter {
    type Result = ();

    fn handle(&mut self, _: Increment, _: &mut Context<Self>) {
        self.count += 1;
    }
}

impl Handler<Get> for Counter {
    type Result = u64;

    fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 {
        self.count
    }
}

struct Targets {
    system: SystemRunner,
    plain: Addr<Counter>,
    supervised: Mailbox<Counter>,
    _arbiter: Arbiter,
}

fn targets() -> Targets {
    let system = actix::System::new();
    let arbiter = Arbiter::new();
    let (plain, supervised) = system.block_on(async {
        let plain = Counter::start_in_arbiter(&arbiter.handle(), |_| Counter::default());
        let (supervised, inbox) = mailbox(1024);
        let mut config = SupervisorConfig::new("bench");
        config.arbiters = Some(1);
        let _supervisor = Supervisor::builder(config)
            .child(ChildSpec::new("counter", inbox, Counter::default))
            .start();
        // Wait until both answer, so start-up is not measured.
        plain.send(Get).await.expect("plain actor runs");
        supervised
            .request(Get)
            .await
            .expect("supervised actor runs");
        (plain, supervised)
    });
    Targets {
        system,
        plain,
        supervised,
        _arbiter: arbiter,
    }
}

fn round_trip(criterion: &mut Criterion) {
    let targets = targets();
    let mut group = criterion.benchmark_group("round_trip");
    group.throughput(Throughput::Elements(1));
    group.bench_function("plain_actix_addr", |bench| {
        bench.iter_custom(|iterations| {
            targets.system.block_on(async {
                let started = Instant::now();
                for _ in 0..iterations {
                    targets.plain.send(Get).await.expect("reply");
                }
                started.elapsed()
            })
        });
    });
    group.bench_function("instrumented_mailbox", |bench| {
        bench.iter_custom(|iterations| {
            targets.system.block_on(async {
                let started = Instant::now();
                for _ in 0..iterations {
                    targets.supervised.request(Get).await.expect("reply");
                }
                started.elapsed()
            })
        });
    });
    group.finish();
}

const BURST: u64 = 1_000;

fn throughput(criterion: &mut Criterion) {
    let targets = targets();
    let mut group = criterion.benchmark_group("throughput");
    group.throughput(Throughput::Elements(BURST));
    group.bench_function("plain_actix_addr", |bench| {
        bench.iter_custom(|iterations| {
            targets.system.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    let started = Instant::now();
                    for _ in 0..BURST {
                        // actix's own fire-and-forget; it ignores the mailbox bound.
                        targets.plain.do_send(Increment);
                    }
                    targets.plain.send(Get).await.expect("reply");
                    total += started.elapsed();
                }
                total
            })
        });
    });
    group.bench_function("instrumented_mailbox", |bench| {
        bench.iter_custom(|iterations| {
            targets.system.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    let started = Instant::now();
                    for _ in 0..BURST {
                        targets.supervised.send(Increment).await.expect("queued");
                    }
                    targets.supervised.request(Get).await.expect("reply");
                    total += started.elapsed();
                }
                total
            })
        });
    });
    group.finish();
}

criterion_group!(benches, round_trip, throughput);
criterion_main!(benches);
