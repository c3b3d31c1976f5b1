//! End-to-end tests: the real `coord` binary against real temporary git repositories.
//! One test binary, one module per area, so the suite links once.

mod harness;
mod smoke;
mod sync;
mod watch;
