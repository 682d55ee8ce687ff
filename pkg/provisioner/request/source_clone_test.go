package request

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestCheckCloneVolumeMode(t *testing.T) {
	fs, block := v1.PersistentVolumeFilesystem, v1.PersistentVolumeBlock
	tests := []struct {
		name          string
		clone, source *v1.PersistentVolumeMode
		wantErr       string
	}{
		{name: "both unset (Filesystem)"},
		{name: "unset clone of a Filesystem source", source: &fs},
		{name: "Filesystem clone of an unset source", clone: &fs},
		{name: "Block clone of a Block source", clone: &block, source: &block},
		{name: "Block clone of an unset source: refused", clone: &block, wantErr: "the source is Filesystem, the clone requests Block"},
		{name: "Block clone of a Filesystem source: refused", clone: &block, source: &fs, wantErr: "the source is Filesystem, the clone requests Block"},
		{name: "unset clone of a Block source: refused", source: &block, wantErr: "the source is Block, the clone requests Filesystem"},
		{name: "Filesystem clone of a Block source: refused", clone: &fs, source: &block, wantErr: "the source is Block, the clone requests Filesystem"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, CheckCloneVolumeMode(tt.clone, tt.source), tt.wantErr)
		})
	}
}
