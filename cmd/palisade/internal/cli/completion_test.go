package cli

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// completionScript prints palisade's completion script for shell into a
// file and returns its path.
func completionScript(t *testing.T, shell string) string {
	t.Helper()
	var out, errb strings.Builder
	require.Equal(t, 0, Run(context.Background(), []string{"completion", shell}, &out, &errb), errb.String())
	path := filepath.Join(t.TempDir(), "palisade."+shell)
	require.NoError(t, os.WriteFile(path, []byte(out.String()), 0o644))
	return path
}

// TestCompletionCoversCommands: every command and every flag of it is in
// both scripts (they are made from the commands map, so a new command or
// flag is there without anyone editing a script).
func TestCompletionCoversCommands(t *testing.T) {
	bash, err := os.ReadFile(completionScript(t, "bash"))
	require.NoError(t, err)
	zsh, err := os.ReadFile(completionScript(t, "zsh"))
	require.NoError(t, err)
	for name, cmd := range commands {
		require.Contains(t, string(bash), "    "+name+")", name)
		require.Contains(t, string(zsh), "    "+name+")", name)
		cfg := DefaultConfig()
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		cmd.flags(fs, &cfg)
		fs.VisitAll(func(f *flag.Flag) {
			require.Contains(t, string(bash), "--"+f.Name, "%s --%s", name, f.Name)
			require.Contains(t, string(zsh), "'--"+f.Name+"[", "%s --%s", name, f.Name)
		})
	}
}

// TestCompletionCoversSubcommands walks the command table: every
// subcommand a command's synopsis shows ("palisade clients list",
// "palisade bootstrap node|client|resource") is offered by both scripts
// in the place of the command's first argument.
func TestCompletionCoversSubcommands(t *testing.T) {
	bash, err := os.ReadFile(completionScript(t, "bash"))
	require.NoError(t, err)
	zsh, err := os.ReadFile(completionScript(t, "zsh"))
	require.NoError(t, err)
	found := map[string][]string{}
	for name, cmd := range commands {
		first := regexp.MustCompile(`(?m)^\s*palisade ` + regexp.QuoteMeta(name) + ` ([a-z][a-z|-]*)(?:\s|$)`)
		for _, m := range first.FindAllStringSubmatch(synopsisBlock(cmd.usage), -1) {
			for _, sub := range strings.Split(m[1], "|") {
				if !slices.Contains(found[name], sub) {
					found[name] = append(found[name], sub)
				}
			}
		}
	}
	// Those at least; a new command with subcommands joins them.
	require.Subset(t, found["clients"], []string{"list", "add", "set-patterns", "remove"})
	require.Subset(t, found["bootstrap"], []string{"node", "client", "resource"})
	require.Subset(t, found["completion"], []string{"bash", "zsh"})
	for name, subs := range found {
		if name == "completion" {
			require.Regexp(t, `(?m)^    completion\) COMPREPLY=\( \$\(compgen -W "bash zsh"`, string(bash))
			require.Contains(t, string(zsh), "    completion) _values shell bash zsh ;;")
			continue
		}
		line := regexp.MustCompile(`(?m)^    ` + regexp.QuoteMeta(name) + `\) .* subs="([^"]*)"`).FindStringSubmatch(string(bash))
		require.NotNil(t, line, "bash offers no subcommands for %s", name)
		require.ElementsMatch(t, subs, strings.Fields(line[1]), name)
		require.Contains(t, string(zsh), "'1:subcommand:("+strings.Join(subs, " ")+")'", name)
	}
}

// findShell returns the path of shell. Without it the test skips, or
// fails when PALISADE_REQUIRE_SHELLS is set (as .ci/run sets it, having
// installed zsh): CI never skips a completion test silently.
func findShell(t *testing.T, shell string) string {
	t.Helper()
	path, err := exec.LookPath(shell)
	if err != nil {
		if os.Getenv("PALISADE_REQUIRE_SHELLS") != "" {
			t.Fatalf("%s is required (PALISADE_REQUIRE_SHELLS is set): %v", shell, err)
		}
		t.Skipf("no %s here; the script itself is checked by TestCompletionCoversCommands", shell)
	}
	return path
}

// TestBashCompletion completes command lines in bash with the script.
func TestBashCompletion(t *testing.T) {
	bash := findShell(t, "bash")
	script := completionScript(t, "bash")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cluster.json"), nil, 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "node1"), 0o755))
	complete := func(words ...string) []string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var quoted []string
		for _, w := range words {
			quoted = append(quoted, "'"+w+"'")
		}
		prog := `source "$1"; COMP_WORDS=(` + strings.Join(quoted, " ") + `); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _palisade; printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.CommandContext(ctx, bash, "--norc", "--noprofile", "-c", prog, "bash", script)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return strings.Fields(string(out))
	}
	require.Equal(t, []string{"version"}, complete("palisade", "vers"))
	require.Subset(t, complete("palisade", "re"), []string{"release", "reshare", "resource"})
	require.Equal(t, []string{"--grace"}, complete("palisade", "lock", "--gr"))
	var acquireFlags []string
	for _, f := range commandFlags("acquire") {
		acquireFlags = append(acquireFlags, "--"+f)
	}
	require.Subset(t, acquireFlags, []string{"--cluster", "--identity", "--ttl", "--wait"})
	require.Equal(t, acquireFlags, complete("palisade", "acquire", "--"))
	require.Equal(t, []string{"cluster.json"}, complete("palisade", "acquire", "--cluster", "clu"))
	require.Equal(t, []string{"node1"}, complete("palisade", "node", "--dir", "n"))
	require.Empty(t, complete("palisade", "acquire", "--ttl", ""), "a duration has nothing to complete")
	require.Equal(t, []string{"zsh"}, complete("palisade", "completion", "z"))
	require.Equal(t, []string{"version"}, complete("palisade", "help", "vers"))
	// Subcommands, before or after the flags; then files again.
	require.Equal(t, []string{"set-patterns"}, complete("palisade", "clients", "se"))
	require.Equal(t, []string{"list", "add", "set-patterns", "remove"}, complete("palisade", "clients", "--cluster", "cluster.json", ""))
	require.Equal(t, []string{"cluster.json"}, complete("palisade", "clients", "list", "clu"))
	require.Equal(t, []string{"node", "client", "resource"}, complete("palisade", "bootstrap", ""))
	// After lock's "--", the words are a command line.
	require.Contains(t, complete("palisade", "lock", "orders-db", "--", "bas"), "bash")
	require.Equal(t, []string{"cluster.json"}, complete("palisade", "lock", "orders-db", "--", "cat", "clu"))
}

// TestZshCompletion loads the script in zsh's completion system.
func TestZshCompletion(t *testing.T) {
	zsh := findShell(t, "zsh")
	script := completionScript(t, "zsh")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, zsh, "-n", script).CombinedOutput()
	require.NoError(t, err, "zsh -n: %s", out)
	prog := `autoload -U compinit; compinit -u -d "$2"; source "$1"; print -r -- $_comps[palisade]`
	out, err = exec.CommandContext(ctx, zsh, "-f", "-c", prog, "zsh", script, filepath.Join(t.TempDir(), "zcompdump")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "_palisade\n", string(out))
}
