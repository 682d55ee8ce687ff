package cli

import (
	"bytes"
	"errors"
	"flag"
	"io"
)

// Exit statuses every program shares.
const (
	// ExitFailed: the program ran and failed.
	ExitFailed = 1
	// ExitBadSetting: a flag, an argument or an environment variable a
	// flag needs is wrong; nothing was done.
	ExitBadSetting = 2
)

// ErrBadSetting marks an error as a bad setting (see BadSetting).
var ErrBadSetting = errors.New("bad setting")

type settingError struct{ err error }

func (e settingError) Error() string { return e.err.Error() }

func (e settingError) Unwrap() []error { return []error{e.err, ErrBadSetting} }

// BadSetting marks err as a bad setting: errors.Is(err, ErrBadSetting)
// holds, and its message is err's. It returns nil for nil.
func BadSetting(err error) error {
	if err == nil {
		return nil
	}
	return settingError{err}
}

// Parse parses args with fs. Help asked for (-h, -help, --help) is printed
// on stdout and Parse returns flag.ErrHelp; a syntax error is returned as a
// bad setting, said by Explain without the usage (the caller prints it,
// with the program's name). fs's output is stderr afterwards.
func Parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	if errors.Is(err, flag.ErrHelp) {
		_, _ = stdout.Write(buf.Bytes())
		return err
	}
	return BadSetting(Explain(fs, args, err))
}

// ExitCode is the exit status for err: 0 for nil and for flag.ErrHelp,
// ExitBadSetting for a bad setting, ExitFailed for any other error.
func ExitCode(err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, ErrBadSetting):
		return ExitBadSetting
	}
	return ExitFailed
}
