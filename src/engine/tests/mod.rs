//! Tests of the planner: an in-memory harness (`harness`), scenario tests with exact outcomes
//! (`unit`, `flows`) and a property test of the tick as a state machine (`props`). No I/O.

mod flows;
mod harness;
mod inplace;
mod numbers;
mod props;
mod silent;
mod unit;
