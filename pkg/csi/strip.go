package csi

import (
	"fmt"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// stripped replaces each secret value; the keys stay, to help debugging.
const stripped = "***stripped***"

// StripSecrets renders msg as JSON for a log line, with the value of every
// secret field replaced. A field is secret if the CSI spec marks it with the
// csi_secret option, or if it is named "secrets" or "..._secrets". msg
// itself is not changed.
func StripSecrets(msg proto.Message) string {
	if msg == nil || !msg.ProtoReflect().IsValid() {
		return "null"
	}
	clone := proto.Clone(msg)
	stripMessage(clone.ProtoReflect())
	b, err := protojson.Marshal(clone)
	if err != nil {
		return fmt.Sprintf("<%s: %v>", msg.ProtoReflect().Descriptor().FullName(), err)
	}
	return string(b)
}

func stripMessage(m protoreflect.Message) {
	// Collect first: a message must not be changed while it is ranged over.
	var secrets []protoreflect.FieldDescriptor
	var nested []protoreflect.Message
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case isSecret(fd):
			secrets = append(secrets, fd)
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					nested = append(nested, mv.Message())
					return true
				})
			}
		case fd.IsList():
			if fd.Message() != nil {
				l := v.List()
				for i := range l.Len() {
					nested = append(nested, l.Get(i).Message())
				}
			}
		case fd.Message() != nil:
			nested = append(nested, v.Message())
		}
		return true
	})
	for _, fd := range secrets {
		stripField(m, fd)
	}
	for _, n := range nested {
		stripMessage(n)
	}
}

// stripField replaces string values with the marker and drops anything else.
func stripField(m protoreflect.Message, fd protoreflect.FieldDescriptor) {
	switch {
	case fd.IsMap() && fd.MapValue().Kind() == protoreflect.StringKind:
		mp := m.Mutable(fd).Map()
		var keys []protoreflect.MapKey
		mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
			keys = append(keys, k)
			return true
		})
		for _, k := range keys {
			mp.Set(k, protoreflect.ValueOfString(stripped))
		}
	case !fd.IsMap() && !fd.IsList() && fd.Kind() == protoreflect.StringKind:
		m.Set(fd, protoreflect.ValueOfString(stripped))
	default:
		m.Clear(fd)
	}
}

func isSecret(fd protoreflect.FieldDescriptor) bool {
	if opts := fd.Options(); opts != nil {
		if secret, ok := proto.GetExtension(opts, csi.E_CsiSecret).(bool); ok && secret {
			return true
		}
	}
	name := string(fd.Name())
	return name == "secrets" || strings.HasSuffix(name, "_secrets")
}
