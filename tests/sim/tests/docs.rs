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

#[test]
fn the_committed_pictures_match_what_the_simulation_draws() {
    let directory = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/pictures");
    let document =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/safety.md"))
            .expect("docs/safety.md exists");
    for picture in report::PICTURES {
        let file = picture.file();
        let committed = std::fs::read_to_string(format!("{directory}/{file}"))
            .unwrap_or_else(|e| panic!("docs/pictures/{file}: {e} (run `make safety-pictures`)"));
        let drawn = picture.render().expect("the run completes");
        assert!(
            committed == drawn,
            "docs/pictures/{file} is out of date: run `make safety-pictures`"
        );
        assert!(
            document.contains(&format!("pictures/{file}")),
            "docs/safety.md does not show pictures/{file}"
        );
    }
    let listed: Vec<String> = report::PICTURES.iter().map(|p| p.file()).collect();
    for entry in std::fs::read_dir(directory).expect("docs/pictures exists") {
        let name = entry.expect("a directory entry").file_name();
        let name = name.to_string_lossy().into_owned();
        assert!(
            listed.contains(&name),
            "docs/pictures/{name} is not drawn by the simulation any more: remove it"
        );
    }
}
