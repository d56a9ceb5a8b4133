//! `keyward`: see docs/cli.md.

fn main() -> std::process::ExitCode {
    keyward_cli::main()
}
