fn main() -> std::process::ExitCode {
    flowscale::cli::main_impl()
}
