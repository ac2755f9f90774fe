//! `switchyard validate graphs/*.toml` wall time, the target of docs/performance.md.
//!
//! Runs the release binary (`cargo bench --bench validate`) as a user would, many
//! times, and prints min / median / p90 wall time; then the in-process cost of
//! load + check per graph, to show where the time goes.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut graphs: Vec<PathBuf> = std::fs::read_dir(root.join("graphs"))
        .expect("graphs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        // The graphs, not their tests (`X.test.toml`), which `switchyard test` runs.
        .filter(|p| !switchyard::testing::is_test_file(p))
        .map(|p| p.strip_prefix(&root).expect("under root").to_path_buf())
        .collect();
    graphs.sort();

    let runs = 100;
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        let status = Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .arg("validate")
            .args(&graphs)
            .current_dir(&root)
            .stdout(std::process::Stdio::null())
            .status()
            .expect("switchyard runs");
        times.push(start.elapsed());
        assert!(status.success(), "the example graphs must validate");
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "validate {} graphs (process wall time, {runs} runs): min {:.2} ms, median {:.2} ms, p90 {:.2} ms",
        graphs.len(),
        ms(times[0]),
        ms(times[runs / 2]),
        ms(times[runs * 9 / 10])
    );

    for path in &graphs {
        let full = root.join(path);
        let reps = 50;
        let start = Instant::now();
        for _ in 0..reps {
            let mut sources = switchyard::Sources::new();
            let v = switchyard::validate_file(&full, &mut sources).expect("readable");
            assert!(v.is_valid());
        }
        println!(
            "  in process: {:<32} {:.3} ms per load + check",
            path.display(),
            ms(start.elapsed()) / reps as f64
        );
    }
}
