// Package flagdoc checks a command's flags against the flag table of its
// documentation: every flag is in the table, every flag the table names
// exists, and the default the table gives is the flag's default. It also
// checks the flags written in prose (prose.go: Mentions, CheckMentions,
// CheckProse): a value given with one (`--name=value`) is one the flag
// takes, and a default given after one ("(default 5m)") is its default,
// by the rules below.
//
// The table is every Markdown table whose header's first two cells are
// "flag" and "default". A row names its flags in its first cell, each in
// backticks (`--name`, or `-v`); its second cell gives their defaults,
// separated by commas (a comma inside backticks or parentheses does not
// count), one for each flag named, in the same order. A row whose flags
// are all klog's gives no default.
//
// A documented default d matches a flag's DefValue v by these rules, and
// no others:
//   - d in backticks is the literal between them: `pvc` is "pvc";
//   - `""` (in backticks or not) is the empty string;
//   - d in words (anything that is not in backticks and is not a
//     number, a duration or true/false: off, in-cluster, the pod's
//     namespace) says what an empty default means at run time, so it
//     stands for the empty string: v must be "";
//   - for a duration flag, d and v are the same duration (1m is 1m0s);
//   - for a number flag, the same number (1000 is 1e3);
//   - for a boolean flag, d is true or false; a boolean flag whose
//     DefValue is empty (flag.BoolFunc) is false;
//   - otherwise d must be v exactly.
//
// So a changed default fails the check, and so does a default in words
// once the code gives the flag a value of its own.
//
// The files:
//   - flagdoc.go: the tables: Rows (every row of every flag table), with
//     Cells and SplitTop to split a row; Check (a flag in no row or in
//     two, a row naming no flag of the set, defaults not one per flag, a
//     default that does not match); Match (the rules above); and
//     CheckREADME, which fails a test for each problem in one document.
//   - prose.go: the flags in prose: Mentions (the code spans outside
//     fenced blocks, with the default the text gives after one);
//     CheckMentions (a value the flag set's own parser refuses, a default
//     Match refuses; a flag the set lacks is another program's); and
//     CheckProse, which fails a test for each problem in the README and
//     docs/*.md, but for the pages it is told are another program's.
package flagdoc
