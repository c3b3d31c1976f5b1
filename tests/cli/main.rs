//! End-to-end tests: the real `coord` binary against real temporary git repositories.
//! One test binary, one module per area, so the suite links once.

mod agents_mcp;
mod agents_prime;
mod agents_run;
mod board_browser;
mod cdp;
mod clones;
mod crash;
mod engine;
mod errors;
mod faults;
mod fencing;
mod foundation;
mod gitstate;
mod harness;
mod hostile;
mod http;
mod inplace;
mod jepsen;
mod json;
mod kill;
mod messages;
mod numbers;
mod patterns;
mod perf_cache;
mod resilience;
mod scale;
mod schemas;
mod serve;
mod ship;
mod smoke;
mod snapshots;
mod steps;
mod sync;
mod trust;
mod watch;
