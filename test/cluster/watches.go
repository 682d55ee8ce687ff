package cluster

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// StorageListsAndWatches counts, from the API server's audit log, the
// lists and watches of claims and PVs each client made so far, keyed
// "<user> <agent> <verb> <resource>" (the agent is the User-Agent's first
// word, "binder/v0.1.0": components that share a user stand apart): a
// watch when it started, a list when it answered. A watch started again where one would do says the API server
// closed that user's watcher (too slow, or its time was up); a list after
// the first, that a watch could not resume.
func (c *Cluster) StorageListsAndWatches() (map[string]int, error) {
	f, err := os.Open(filepath.Join(c.Dir, auditLogName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	defer f.Close()
	counts := map[string]int{}
	r := bufio.NewReaderSize(f, 64*1024)
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return counts, nil // a last line without its newline is being written
		} else if err != nil {
			return nil, err
		}
		var ev auditEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, err
		}
		if ev.ObjectRef == nil || ev.ObjectRef.APIGroup != "" ||
			(ev.ObjectRef.Resource != "persistentvolumeclaims" && ev.ObjectRef.Resource != "persistentvolumes") {
			continue
		}
		if (ev.Verb == "watch" && ev.Stage == "ResponseStarted") || (ev.Verb == "list" && ev.Stage == "ResponseComplete") {
			agent, _, _ := strings.Cut(ev.UserAgent, " ")
			counts[fmt.Sprintf("%s %s %s %s", ev.User.Username, agent, ev.Verb, ev.ObjectRef.Resource)]++
		}
	}
}
