"""The `ipuflow` command line: one module per subcommand; heavy imports happen inside commands."""
