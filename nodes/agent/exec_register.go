package agent

// CLIProviders are the names RegisterCLI registers.
var CLIProviders = []string{"claude", "codex", "gemini-cli", "command"}

// RegisterCLI adds the CLI providers (claude, codex, gemini-cli, command) to r,
// each configured with opts. opts.Bin is ignored: each provider takes its
// executable from SWITCHYARD_<NAME>_BIN, else its usual name (for command:
// the default command line from SWITCHYARD_COMMAND_BIN, else none). To
// configure one provider differently, register it with NewClaude... after
// this call. Providers are created now; executables are looked up when they
// run or are checked, so registering never fails.
func RegisterCLI(r *Registry, opts CLIOptions) {
	opts.Bin = ""
	// The providers share the tables they only read (made once here, not
	// once per provider: they were a tenth of a short Go Run's start).
	if opts.Prices == nil {
		opts.Prices = DefaultPrices()
	}
	if opts.Roles == nil {
		opts.Roles = BuiltinRoles()
	}
	r.Register("claude", NewClaude(opts))
	r.Register("codex", NewCodex(opts))
	r.Register("gemini-cli", NewGemini(opts))
	cmd := opts
	cmd.Bin = getenv("SWITCHYARD_COMMAND_BIN")
	r.Register("command", NewCommand(cmd))
}
