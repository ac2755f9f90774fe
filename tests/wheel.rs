//! `pip install` of the wheel `bash scripts/wheel dev` built with maturin (the README's
//! test command builds it before `cargo test`; building it here would race the other
//! tests for `target/debug/switchyard`): installed without an index into a fresh
//! virtual environment, the `switchyard` it puts on the environment's PATH is the binary
//! the tests run, and checks every graph of graphs/ (the seed graphs) as it does.

use crate::util::{examples, root};
use std::path::PathBuf;
use std::process::{Command, Output};

fn the_wheel() -> PathBuf {
    let dir = root().join("target/wheels");
    let wheels: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    let n = p.file_name().unwrap().to_string_lossy();
                    n.starts_with("switchyard-") && n.ends_with(".whl")
                })
                .collect()
        })
        .unwrap_or_default();
    assert!(
        wheels.len() == 1,
        "want one switchyard wheel in {}, found {wheels:?}: run `bash scripts/wheel dev` \
         (the README's test command `bash .ci/test` does)",
        dir.display()
    );
    wheels.into_iter().next().unwrap()
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn the_wheel_installs_the_command_that_validates_the_seed_graphs() {
    let wheel = the_wheel();
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    // The command alone, for any Python 3 on this platform.
    assert!(
        name.starts_with(concat!(
            "switchyard-",
            env!("CARGO_PKG_VERSION"),
            "-py3-none-"
        )),
        "{name}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    run(Command::new("python3").args(["-m", "venv"]).arg(&venv));
    run(Command::new(venv.join("bin/pip"))
        .args([
            "install",
            "--no-index",
            "--no-deps",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .arg(&wheel));
    let bin = venv.join("bin/switchyard");
    // The very binary the tests run: a wheel left from an older build is caught here.
    assert!(
        std::fs::read(&bin).unwrap() == std::fs::read(env!("CARGO_BIN_EXE_switchyard")).unwrap(),
        "{} is not target/debug/switchyard: run `bash scripts/wheel dev` again",
        wheel.display()
    );
    let version = run(Command::new(&bin).arg("--version"));
    assert_eq!(
        String::from_utf8_lossy(&version.stdout),
        concat!("switchyard ", env!("CARGO_PKG_VERSION"), "\n")
    );
    let graphs = examples();
    let out = run(Command::new(&bin)
        .arg("validate")
        .args(&graphs)
        .current_dir(root()));
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split(" (").next().unwrap().to_string())
        .collect();
    let expected: Vec<String> = graphs
        .iter()
        .map(|g| format!("{}: ok", g.display()))
        .collect();
    assert_eq!(lines, expected);
}
