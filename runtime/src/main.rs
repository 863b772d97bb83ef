fn main() -> std::process::ExitCode {
    sluice_runtime::cli::main()
}
