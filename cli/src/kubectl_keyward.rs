//! `kubectl keyward …`: kubectl runs `kubectl-keyward` from PATH with the remaining arguments.

fn main() -> std::process::ExitCode {
    keyward_cli::main()
}
