//! Fuzzes parse + validate + coord/result block edits of a task file (`coord::fuzz::task_file`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    coord::fuzz::task_file(data);
});
