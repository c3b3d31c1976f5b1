//! The `coord` binary: runs the command line and turns the outcome into an exit code.

fn main() -> std::process::ExitCode {
    coord::run(std::env::args_os())
}
