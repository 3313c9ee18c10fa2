//! `docs/safety.md` holds the table the report command prints.

use redlock_sim::report::{self, Settings};

#[test]
fn the_committed_table_matches_the_report() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/safety.md");
    let document = std::fs::read_to_string(path).expect("docs/safety.md exists");
    let committed =
        report::generated_part(&document).expect("docs/safety.md has the table markers");
    let printed = report::table(Settings::default());
    assert_eq!(
        committed,
        printed.trim_matches('\n'),
        "docs/safety.md is out of date: run `cargo run -p redlock-sim --release -- report --update docs/safety.md`"
    );
}
