//! The committed headers must be exactly what the pinned cbindgen generates from the
//! sources now. Regenerate them with `REDLOCK_BLESS=1 cargo test -p redlock-ffi --test headers`.

use std::path::{Path, PathBuf};

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn generate(config_file: &str) -> String {
    let dir = crate_dir();
    let config = cbindgen::Config::from_file(dir.join(config_file))
        .unwrap_or_else(|e| panic!("{config_file}: {e}"));
    let bindings = cbindgen::Builder::new()
        .with_crate(&dir)
        .with_config(config)
        .generate()
        .unwrap_or_else(|e| panic!("cbindgen with {config_file}: {e}"));
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("cbindgen writes UTF-8")
}

/// PHP's `FFI::cdef` reads no preprocessor lines: each `#define NAME VALUE` becomes an
/// enum of its own, the C23 branches cbindgen writes for fixed-width enums are resolved
/// to their pre-C23 side (a `uint32_t` typedef), and any other `#` line is an error.
fn for_php(header: &str) -> String {
    const C23: &str = "#if __STDC_VERSION__ >= 202311L";
    let mut out = String::with_capacity(header.len());
    // Inside a C23 conditional: whether the current branch is the one kept.
    let mut in_c23: Option<bool> = None;
    for line in header.lines() {
        match (line, in_c23) {
            (C23, None) => in_c23 = Some(false),
            ("#else", Some(false)) => in_c23 = Some(true),
            (end, Some(_)) if end.starts_with("#endif") => in_c23 = None,
            (_, Some(false)) => {}
            _ => {
                if let Some(rest) = line.strip_prefix("#define ") {
                    let (name, value) = rest
                        .split_once(' ')
                        .unwrap_or_else(|| panic!("constant without value: {line}"));
                    assert!(
                        value.bytes().all(|b| b.is_ascii_digit()),
                        "PHP enums take integers only: {line}"
                    );
                    out.push_str(&format!("enum {{ {name} = {value} }};\n"));
                    continue;
                }
                assert!(!line.starts_with('#'), "preprocessor line for PHP: {line}");
                assert!(!line.contains("extern \"C\""), "C++ guard for PHP: {line}");
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    assert_eq!(in_c23, None, "unterminated C23 conditional");
    out
}

fn check(path: &Path, generated: &str) {
    if std::env::var_os("REDLOCK_BLESS").is_some() {
        std::fs::write(path, generated).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    if committed != generated {
        let line = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .map_or_else(|| "the end".to_string(), |i| format!("line {}", i + 1));
        panic!(
            "{} differs from what cbindgen generates now (first difference at {line}); \
             regenerate it with: REDLOCK_BLESS=1 cargo test -p redlock-ffi --test headers",
            path.display()
        );
    }
}

#[test]
fn c_header_is_current() {
    check(
        &crate_dir().join("include/redlock.h"),
        &generate("cbindgen.toml"),
    );
}

#[test]
fn php_header_is_current() {
    check(
        &crate_dir().join("include/redlock_php.h"),
        &for_php(&generate("cbindgen-php.toml")),
    );
}
