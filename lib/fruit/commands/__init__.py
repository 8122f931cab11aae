"""The subcommands of ``fruit`` (``fruit.cli``): one module each, imported only when it runs."""
