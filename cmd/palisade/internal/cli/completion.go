package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

const completionUsage = `Usage:
    palisade completion bash|zsh

Prints a completion script for bash or zsh on stdout. The script is
generated from palisade's own commands and their flags, so it is as
current as the binary that printed it: commands, flags (with their
descriptions in zsh), file and directory names for --cluster, --identity,
--dir and the like, and the command line after lock's "--".

Example:
    $ source <(palisade completion bash)         # in ~/.bashrc
    $ palisade completion zsh > "${fpath[1]}/_palisade"
    $ palisade acq<TAB> --ide<TAB>
    $ palisade acquire --identity
`

// completionShells are the shells completion writes scripts for; see
// completionWriter.
var completionShells = []string{"bash", "zsh"}

// completionWriter returns the script writer for shell.
func completionWriter(shell string) (func(io.Writer, []completionCommand), bool) {
	switch shell {
	case "bash":
		return writeBashCompletion, true
	case "zsh":
		return writeZshCompletion, true
	}
	return nil, false
}

func init() {
	// Here, not in the commands literal: runCompletion reads commands,
	// which would make the literal refer to itself.
	commands["completion"] = command{completionUsage, runCompletion, func(*flag.FlagSet, *Config) {}}
}

func runCompletion(_ context.Context, e *env, _ Config, args []string) error {
	if len(args) != 1 {
		return usageErrorf("completion", "completion: want one shell, bash or zsh, got %d arguments", len(args))
	}
	write, ok := completionWriter(args[0])
	if !ok {
		return usageErrorf("completion", "completion: unknown shell %q: want bash or zsh", args[0])
	}
	write(e.stdout, completionCommands())
	return nil
}

// completionCommand is what a completion script knows of one command.
type completionCommand struct {
	name     string
	synopsis string
	flags    []completionFlag
	// command: the arguments after the command's own are another
	// program's command line (lock).
	command bool
	// subcommands are the words the command takes first (clients list,
	// bootstrap node), read from its synopsis.
	subcommands []string
}

// completionFlag is one flag of a command.
type completionFlag struct {
	name string
	// bool flags take no value.
	bool bool
	// meta is the value's name in the usage text (FILE, DIR, D, N).
	meta string
	// desc is the flag's one-line description from the usage text.
	desc string
}

// completes says how the flag's value completes: "file", "dir" or ""
// (nothing to offer: a duration, a number, a name).
func (f completionFlag) completes() string {
	switch {
	case f.bool:
		return ""
	case f.meta == "DIR" || strings.HasSuffix(f.name, "dir"):
		return "dir"
	case f.meta == "FILE":
		return "file"
	}
	return ""
}

// completionCommands lists every command with its flags, read from the
// commands map and each command's flag set and usage text; "help" too.
func completionCommands() []completionCommand {
	names := make([]string, 0, len(commands)+1)
	for name := range commands {
		names = append(names, name)
	}
	names = append(names, "help")
	slices.Sort(names)
	out := make([]completionCommand, 0, len(names))
	for _, name := range names {
		if name == "help" {
			out = append(out, completionCommand{name: name, synopsis: synopsis(helpUsage, name)})
			continue
		}
		cmd := commands[name]
		cfg := DefaultConfig()
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		cmd.flags(fs, &cfg)
		cc := completionCommand{name: name, synopsis: synopsis(cmd.usage, name), command: ownArgs[name] > 0, subcommands: subcommandsOf(cmd.usage, name)}
		fs.VisitAll(func(f *flag.Flag) {
			cf := completionFlag{name: f.Name}
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				cf.bool = true
			}
			cf.meta, cf.desc = flagDoc(cmd.usage, f.Name)
			for _, m := range asFor.FindAllStringSubmatch(cmd.usage, -1) {
				// A flag documented "as for dkg": take that command's entry.
				if other, ok := commands[m[1]]; ok && cf.desc == "" {
					cf.meta, cf.desc = flagDoc(other.usage, f.Name)
				}
			}
			if g, ok := f.Value.(flag.Getter); ok && cf.meta == "" {
				if _, isString := g.Get().(string); isString {
					cf.meta = "FILE" // undocumented string flags: files, the likeliest
				}
			}
			cc.flags = append(cc.flags, cf)
		})
		out = append(out, cc)
	}
	return out
}

// synopsis is a usage text's synopsis, its lines joined, without
// "palisade NAME".
func synopsis(usage, name string) string {
	_, rest, _ := strings.Cut(usage, "Usage:\n")
	block, _, _ := strings.Cut(rest, "\n\n")
	line := strings.Join(strings.Fields(block), " ")
	return strings.TrimSpace(strings.TrimPrefix(line, "palisade "+name))
}

// subcommandsOf reads the subcommands of command name from its usage
// text's synopsis: the word after "palisade NAME" on each of its lines,
// when it is a lower-case word and not a flag, with alternatives split on
// "|" ("palisade bootstrap node|client|resource", "palisade clients
// list ..."). Upper-case placeholders (RESOURCE) and "[...]" are not
// subcommands.
func subcommandsOf(usage, name string) []string {
	_, rest, _ := strings.Cut(usage, "Usage:\n")
	block, _, _ := strings.Cut(rest, "\n\n")
	var out []string
	for _, l := range strings.Split(block, "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || f[0] != "palisade" || f[1] != name {
			continue
		}
		for _, w := range strings.Split(strings.Trim(f[2], "()"), "|") {
			if subcommandWord.MatchString(w) && !slices.Contains(out, w) {
				out = append(out, w)
			}
		}
	}
	return out
}

// subcommandWord matches a subcommand: lower-case letters and dashes, not
// starting with a dash.
var subcommandWord = regexp.MustCompile(`^[a-z][a-z-]*$`)

// asFor matches a usage text's reference to another command's flags:
// "as for keygen".
var asFor = regexp.MustCompile(`as for ([a-z]+)`)

// envSuffix matches the "[PALISADE_X]" at the end of a flag's description.
var envSuffix = regexp.MustCompile(`\s*\[PALISADE_[A-Z_]+\]\s*$`)

// flagLine matches a flag's line in a usage text: "    --name META   what
// it does"; the description may go on, further indented, on the lines
// after it.
var flagLine = regexp.MustCompile(`^(\s+)--([a-z][a-z-]*)(?:\s([A-Z][A-Z,.]*))?\s{2,}(\S.*)$`)

// flagDoc finds a flag's entry in a usage text and returns its META and
// its description without the environment variable. A flag the text does
// not list has neither.
func flagDoc(usage, name string) (meta, desc string) {
	lines := strings.Split(usage, "\n")
	for i, l := range lines {
		m := flagLine.FindStringSubmatch(l)
		if m == nil || m[2] != name {
			continue
		}
		meta, desc = m[3], m[4]
		// Continuation lines start where the description does.
		indent := strings.Index(l, m[4])
		for _, next := range lines[i+1:] {
			trimmed := strings.TrimLeft(next, " ")
			if trimmed == "" || len(next)-len(trimmed) != indent {
				break
			}
			desc += " " + trimmed
		}
		return meta, envSuffix.ReplaceAllString(desc, "")
	}
	return "", ""
}

func writeBashCompletion(w io.Writer, cmds []completionCommand) {
	var names []string
	for _, c := range cmds {
		names = append(names, c.name)
	}
	fmt.Fprintf(w, `# bash completion for palisade, generated by "palisade completion bash".
# Load it with: source <(palisade completion bash)
_palisade() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local commands=%q
    if (( COMP_CWORD == 1 )); then
        COMPREPLY=( $(compgen -W "$commands" -- "$cur") )
        return
    fi
    local flags="" files="" dirs="" values="" command="" subs=""
    case ${COMP_WORDS[1]} in
`, strings.Join(names, " "))
	for _, c := range cmds {
		var flags, files, dirs, values []string
		for _, f := range c.flags {
			flags = append(flags, "--"+f.name)
			switch {
			case f.bool:
			case f.completes() == "file":
				files = append(files, "--"+f.name)
			case f.completes() == "dir":
				dirs = append(dirs, "--"+f.name)
			default:
				values = append(values, "--"+f.name)
			}
		}
		switch c.name {
		case "help":
			fmt.Fprintf(w, "    help) COMPREPLY=( $(compgen -W \"$commands\" -- \"$cur\") ); return ;;\n")
			continue
		case "completion":
			fmt.Fprintf(w, "    completion) COMPREPLY=( $(compgen -W %q -- \"$cur\") ); return ;;\n", strings.Join(completionShells, " "))
			continue
		}
		command := ""
		if c.command {
			command = " command=1"
		}
		if len(c.subcommands) > 0 {
			command += fmt.Sprintf(" subs=%q", strings.Join(c.subcommands, " "))
		}
		fmt.Fprintf(w, "    %s) flags=%q files=%q dirs=%q values=%q%s ;;\n", c.name,
			strings.Join(flags, " "), strings.Join(files, " "), strings.Join(dirs, " "), strings.Join(values, " "), command)
	}
	fmt.Fprint(w, `    *) return ;;
    esac
    if [[ -n $command ]]; then
        # After "--", the words are another command line.
        local i
        for (( i = 2; i < COMP_CWORD; i++ )); do
            if [[ ${COMP_WORDS[i]} == -- ]]; then
                if (( i == COMP_CWORD - 1 )); then
                    COMPREPLY=( $(compgen -c -- "$cur") )
                else
                    compopt -o filenames 2>/dev/null
                    COMPREPLY=( $(compgen -f -- "$cur") )
                fi
                return
            fi
        done
    fi
    case " $files " in *" $prev "*)
        compopt -o filenames 2>/dev/null
        COMPREPLY=( $(compgen -f -- "$cur") )
        return ;;
    esac
    case " $dirs " in *" $prev "*)
        compopt -o filenames 2>/dev/null
        COMPREPLY=( $(compgen -d -- "$cur") )
        return ;;
    esac
    case " $values " in *" $prev "*) return ;; esac
    if [[ -n $subs && $cur != -* ]]; then
        # The first word that is not a flag picks the subcommand.
        local w have=""
        for w in "${COMP_WORDS[@]:2:COMP_CWORD-2}"; do
            case " $subs " in *" $w "*) have=1 ;; esac
        done
        if [[ -z $have ]]; then
            COMPREPLY=( $(compgen -W "$subs" -- "$cur") )
            return
        fi
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=( $(compgen -W "$flags" -- "$cur") )
        return
    fi
    compopt -o filenames 2>/dev/null
    COMPREPLY=( $(compgen -f -- "$cur") )
}
complete -F _palisade palisade
`)
}

func writeZshCompletion(w io.Writer, cmds []completionCommand) {
	fmt.Fprint(w, `#compdef palisade
# zsh completion for palisade, generated by "palisade completion zsh".
# Load it with: source <(palisade completion zsh)
# or save it as _palisade in a directory of $fpath.
_palisade() {
  local -a commands
  commands=(
`)
	for _, c := range cmds {
		fmt.Fprintf(w, "    %s\n", zshQuote(zshEscape(c.name)+":"+zshEscape(c.synopsis)))
	}
	fmt.Fprint(w, `  )
  if (( CURRENT == 2 )); then
    _describe -t commands 'palisade command' commands
    return
  fi
  local cmd=$words[2]
  shift words
  (( CURRENT-- ))
  case $cmd in
`)
	for _, c := range cmds {
		switch c.name {
		case "help":
			fmt.Fprint(w, "    help) _describe -t commands 'palisade command' commands ;;\n")
			continue
		case "completion":
			fmt.Fprintf(w, "    completion) _values shell %s ;;\n", strings.Join(completionShells, " "))
			continue
		}
		fmt.Fprintf(w, "    %s)\n      _arguments -S \\\n", c.name)
		for _, f := range c.flags {
			spec := "--" + f.name + "[" + zshEscape(f.desc) + "]"
			if !f.bool {
				meta := f.meta
				if meta == "" {
					meta = f.name
				}
				action := ""
				switch f.completes() {
				case "file":
					action = "_files"
				case "dir":
					action = "_files -/"
				}
				spec += ":" + zshEscape(meta) + ":" + action
			}
			fmt.Fprintf(w, "        %s \\\n", zshQuote(spec))
		}
		switch {
		case c.command:
			fmt.Fprint(w, "        '1:resource: ' \\\n        '*::command:_normal'\n      ;;\n")
		case len(c.subcommands) > 0:
			fmt.Fprintf(w, "        %s \\\n        '*:argument:_files'\n      ;;\n", zshQuote("1:subcommand:("+strings.Join(c.subcommands, " ")+")"))
		default:
			fmt.Fprint(w, "        '*:argument:_files'\n      ;;\n")
		}
	}
	fmt.Fprint(w, `  esac
}
if [[ $funcstack[1] == _palisade ]]; then
  _palisade "$@"
else
  compdef _palisade palisade
fi
`)
}

// zshEscape escapes the characters _arguments and _describe give a
// meaning: colons and brackets.
func zshEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `:`, `\:`, `[`, `\[`, `]`, `\]`)
	return r.Replace(s)
}

// zshQuote quotes s in single quotes for zsh.
func zshQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
