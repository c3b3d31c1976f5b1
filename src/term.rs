//! Writing lines on stdout and stderr without panicking: a closed stdout ends the program
//! quietly (`coord log | head`), a closed stderr loses the line. Every front end prints
//! through these.

/// Writes one line to stdout; exits 0 when the reader went away, like other Unix tools.
pub fn write_out(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = writeln!(stdout, "{args}") {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
    }
}

/// Writes one line on stderr, ignoring a failed write: status and error lines are worth
/// nothing to a reader that closed stderr, and printing must never panic.
pub fn write_err(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{args}");
}
