//! `keyward-crdgen [--check] DIR...`: writes the CRD YAML into each DIR, or with `--check`
//! fails when a DIR differs from what the Rust types generate.

use std::path::PathBuf;
use std::process::ExitCode;

use keyward_crds::generate::{check_all, write_all};

fn main() -> ExitCode {
    let mut check = false;
    let mut dirs = Vec::new();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--check" => check = true,
            "-h" | "--help" => {
                println!(
                    "usage: keyward-crdgen [--check] DIR...\nWrites (or checks) one YAML file per Keyward CRD in each DIR."
                );
                return ExitCode::SUCCESS;
            }
            _ => dirs.push(PathBuf::from(arg)),
        }
    }
    if dirs.is_empty() {
        eprintln!("usage: keyward-crdgen [--check] DIR...");
        return ExitCode::from(2);
    }
    let mut failed = false;
    for dir in &dirs {
        let result = if check { check_all(dir) } else { write_all(dir) };
        match result {
            Ok(()) if check => println!("{}: up to date", dir.display()),
            Ok(()) => println!("{}: written", dir.display()),
            Err(e) => {
                eprintln!("error: {e}");
                failed = true;
            }
        }
    }
    if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
