package cli

import (
	"flag"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// commandFlags lists the flags command name accepts, from its FlagSet.
func commandFlags(name string) []string {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	commands[name].flags(fs, &cfg)
	var out []string
	fs.VisitAll(func(f *flag.Flag) { out = append(out, f.Name) })
	return out
}

// synopsisBlock is the "Usage:" block of a usage text: its lines up to the
// first empty one.
func synopsisBlock(usage string) string {
	_, rest, _ := strings.Cut(usage, "Usage:\n")
	block, _, _ := strings.Cut(rest, "\n\n")
	return block
}

// overviewLines are the lines of "palisade help" that show command name,
// with their continuation lines.
func overviewLines(name string) string {
	var out []string
	in := false
	for _, l := range strings.Split(synopsisBlock(usage), "\n") {
		f := strings.Fields(l)
		if len(f) > 0 && f[0] == "palisade" {
			in = len(f) > 1 && f[1] == name
		}
		if in {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// mentions reports whether text names flag --name as a word.
func mentions(text, name string) bool {
	return regexp.MustCompile(`--` + regexp.QuoteMeta(name) + `\b`).MatchString(text)
}

// TestHelpListsEveryFlag walks every command in the table (whatever it
// holds when the test runs) and every flag of its FlagSet: the flag is in
// the command's synopsis ("palisade COMMAND -h"), in its line of
// "palisade help", and described in its flags section (directly or by
// "as for COMMAND"), so no accepted flag goes undocumented.
func TestHelpListsEveryFlag(t *testing.T) {
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		cmd := commands[name]
		syn := synopsisBlock(cmd.usage)
		require.NotEmpty(t, syn, "%s has no Usage: block", name)
		over := overviewLines(name)
		require.NotEmpty(t, over, "palisade help has no line for %s", name)
		for _, f := range commandFlags(name) {
			assert.True(t, mentions(syn, f), "the synopsis of %q does not list --%s:\n%s", name, f, syn)
			assert.True(t, mentions(over, f), "palisade help's line for %q does not list --%s:\n%s", name, f, over)
			_, desc := flagDoc(cmd.usage, f)
			for _, m := range asFor.FindAllStringSubmatch(cmd.usage, -1) {
				if other, ok := commands[m[1]]; ok && desc == "" {
					_, desc = flagDoc(other.usage, f)
				}
			}
			if desc == "" {
				// A flags line naming several: "--name, --host, --base-port   as for keygen".
				desc = groupedFlagDoc(cmd.usage, f)
			}
			assert.NotEmpty(t, desc, "the usage of %q does not describe --%s in its flags section", name, f)
		}
	}
}

// groupedFlagDoc finds a flags line that names several flags at once
// ("    --name, --host, --base-port   as for keygen") and returns its
// description if it names --name.
func groupedFlagDoc(usage, name string) string {
	for _, l := range strings.Split(usage, "\n") {
		t := strings.TrimSpace(l)
		if !strings.HasPrefix(t, "--") || !strings.Contains(t, ", --") {
			continue
		}
		list, desc, ok := strings.Cut(t, "   ")
		if !ok {
			continue
		}
		for _, f := range strings.Split(list, ",") {
			if strings.TrimSpace(f) == "--"+name {
				return strings.TrimSpace(desc)
			}
		}
	}
	return ""
}
