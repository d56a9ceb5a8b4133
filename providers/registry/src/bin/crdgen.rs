//! `keyward-crdgen [--check] DIR... [--chart DIR]`: writes the CRD YAML into each DIR (plain
//! YAML) and the chart's CRD templates into the `--chart` DIR, or with `--check` fails when a
//! directory differs from what the Rust types generate.

use std::path::PathBuf;
use std::process::ExitCode;

use keyward_crds::generate::{Layout, check_all, write_all};
use keyward_provider_registry::PROVIDER_KINDS;

fn main() -> ExitCode {
    let mut check = false;
    let mut dirs = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--check" => check = true,
            "--chart" => match args.next() {
                Some(dir) => dirs.push((PathBuf::from(dir), Layout::HelmTemplate)),
                None => {
                    eprintln!("--chart needs a directory");
                    return ExitCode::from(2);
                }
            },
            "-h" | "--help" => {
                println!(
                    "usage: keyward-crdgen [--check] DIR... [--chart DIR]\nWrites (or checks) one YAML file per Keyward CRD in each DIR, and one Helm template per CRD in the --chart DIR."
                );
                return ExitCode::SUCCESS;
            }
            _ => dirs.push((PathBuf::from(arg), Layout::Plain)),
        }
    }
    if dirs.is_empty() {
        eprintln!("usage: keyward-crdgen [--check] DIR... [--chart DIR]");
        return ExitCode::from(2);
    }
    let mut failed = false;
    for (dir, layout) in &dirs {
        let result =
            if check { check_all(dir, *layout, PROVIDER_KINDS) } else { write_all(dir, *layout, PROVIDER_KINDS) };
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
