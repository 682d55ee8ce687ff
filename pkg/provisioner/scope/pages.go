package scope

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// PageReader lists one page of a resource and hands each of its objects to
// each as it is read, in order; it returns the page's list metadata (its
// resourceVersion, continue token and count of the objects after it).
type PageReader func(ctx context.Context, opts metav1.ListOptions, each func(runtime.Object)) (metav1.ListMeta, error)

// TypedPages is a PageReader over a client's own List: the page is read
// whole, then handed over object by object. For clients without a REST
// client (the fake clientset).
func TypedPages(list func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error)) PageReader {
	return func(ctx context.Context, opts metav1.ListOptions, each func(runtime.Object)) (metav1.ListMeta, error) {
		page, err := list(ctx, opts)
		if err != nil {
			return metav1.ListMeta{}, err
		}
		return handOver(page, each)
	}
}

// handOver hands a decoded page's objects to each, and returns its list
// metadata.
func handOver(page runtime.Object, each func(runtime.Object)) (metav1.ListMeta, error) {
	lm, err := meta.ListAccessor(page)
	if err != nil {
		return metav1.ListMeta{}, err
	}
	items, err := meta.ExtractList(page)
	if err != nil {
		return metav1.ListMeta{}, err
	}
	for i, obj := range items {
		items[i] = nil
		each(obj)
	}
	return metav1.ListMeta{ResourceVersion: lm.GetResourceVersion(), Continue: lm.GetContinue(),
		RemainingItemCount: lm.GetRemainingItemCount()}, nil
}

// protobufItem is an API object that decodes itself from protobuf.
type protobufItem[T any] interface {
	*T
	runtime.Object
	Unmarshal(data []byte) error
}

// StreamPages is a PageReader of a resource (of the core group, across
// namespaces) through its REST client that decodes a page one object at a
// time as the API server's response arrives: however many objects a page
// holds, only the one being read is in memory besides those kept. So pages
// may be large, which the API server's watch cache needs: up to Kubernetes
// 1.37 it gathers, for every page it serves, every object from the page's
// start to the end of the resource, and then keeps a page of them, so that
// a listing in pages of n costs it the square of the resource's size over
// 2n (docs/performance.md, "A driver roll"). A response that is not in
// protobuf (a proxy's JSON) is decoded whole.
func StreamPages[T any, PT protobufItem[T]](client rest.Interface, resource string) PageReader {
	return func(ctx context.Context, opts metav1.ListOptions, each func(runtime.Object)) (metav1.ListMeta, error) {
		body, err := client.Get().Resource(resource).VersionedParams(&opts, scheme.ParameterCodec).
			SetHeader("Accept", runtime.ContentTypeProtobuf+", "+runtime.ContentTypeJSON).Stream(ctx)
		if err != nil {
			return metav1.ListMeta{}, err
		}
		defer body.Close()
		r := bufio.NewReaderSize(body, 64<<10)
		if prefix, err := r.Peek(len(protobufPrefix)); err != nil || !bytes.Equal(prefix, protobufPrefix) {
			return decodeWhole(r, each)
		}
		return readPage(r, func(data []byte) error {
			obj := PT(new(T))
			if err := obj.Unmarshal(data); err != nil {
				return err
			}
			each(obj)
			return nil
		})
	}
}

// decodeWhole decodes a page in another encoding than protobuf whole, and
// hands its objects to each.
func decodeWhole(r io.Reader, each func(runtime.Object)) (metav1.ListMeta, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return metav1.ListMeta{}, err
	}
	page, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		return metav1.ListMeta{}, fmt.Errorf("scope: a page of a listing: %w", err)
	}
	return handOver(page, each)
}

// protobufPrefix opens every object of Kubernetes' protobuf encoding: "k8s"
// and a zero byte, then a runtime.Unknown whose raw bytes are the object.
var protobufPrefix = []byte{'k', '8', 's', 0}

// maxItem bounds the size of one object of a page: more is not an object
// the API server stores (etcd takes 1.5 MiB a value by default).
const maxItem = 64 << 20

// readPage reads a list in Kubernetes' protobuf encoding from r, one item at
// a time: each gets the bytes of every item in order (valid only during
// the call). The list's metadata is returned. The fields of the envelope
// (runtime.Unknown) and of the list may come in any order; fields it does
// not know are skipped.
func readPage(r *bufio.Reader, each func(item []byte) error) (metav1.ListMeta, error) {
	var lm metav1.ListMeta
	prefix := make([]byte, len(protobufPrefix))
	if _, err := io.ReadFull(r, prefix); err != nil || !bytes.Equal(prefix, protobufPrefix) {
		return lm, errors.New("scope: a page of a listing is not in Kubernetes' protobuf encoding")
	}
	in := &fields{r: r, left: -1}
	var buf []byte
	raw := false
	for {
		num, wire, err := in.next()
		if err == io.EOF {
			break
		} else if err != nil {
			return lm, err
		}
		if num != 2 || wire != lenWire { // TypeMeta, ContentEncoding, ContentType
			if err := in.skip(wire); err != nil {
				return lm, err
			}
			continue
		}
		size, err := in.length()
		if err != nil {
			return lm, err
		}
		raw = true
		list := &fields{r: r, left: size}
		for {
			num, wire, err := list.next()
			if err == io.EOF {
				break
			} else if err != nil {
				return lm, err
			}
			if (num != 1 && num != 2) || wire != lenWire {
				if err := list.skip(wire); err != nil {
					return lm, err
				}
				continue
			}
			if buf, err = list.bytes(buf); err != nil {
				return lm, err
			}
			if num == 1 {
				err = lm.Unmarshal(buf)
			} else {
				err = each(buf)
			}
			if err != nil {
				return lm, fmt.Errorf("scope: a page of a listing: %w", err)
			}
		}
	}
	if !raw {
		return lm, errors.New("scope: a page of a listing holds no list")
	}
	return lm, nil
}

// lenWire is protobuf's wire type of length-delimited fields.
const lenWire = 2

// fields reads protobuf fields from r: all of what is left of r when left
// is negative, else the next left bytes.
type fields struct {
	r    *bufio.Reader
	left int64
}

// ReadByte reads one byte, counted.
func (f *fields) ReadByte() (byte, error) {
	if f.left == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	b, err := f.r.ReadByte()
	if err == nil && f.left > 0 {
		f.left--
	}
	return b, err
}

// next reads a field's tag: io.EOF when the fields end where a field may.
func (f *fields) next() (num int, wire int, err error) {
	if f.left == 0 {
		return 0, 0, io.EOF
	}
	if f.left < 0 {
		if _, err := f.r.Peek(1); err == io.EOF {
			return 0, 0, io.EOF
		}
	}
	tag, err := binary.ReadUvarint(f)
	if err != nil {
		return 0, 0, unexpected(err)
	}
	return int(tag >> 3), int(tag & 7), nil
}

// length reads a length-delimited field's length, which must fit in what
// is left.
func (f *fields) length() (int64, error) {
	n, err := binary.ReadUvarint(f)
	if err != nil {
		return 0, unexpected(err)
	}
	if n > 1<<62 || (f.left >= 0 && int64(n) > f.left) {
		return 0, errors.New("scope: a page of a listing: a field longer than what holds it")
	}
	return int64(n), nil
}

// bytes reads a length-delimited field's value into buf, grown as needed.
func (f *fields) bytes(buf []byte) ([]byte, error) {
	n, err := f.length()
	if err != nil {
		return buf, err
	}
	if n > maxItem {
		return buf, fmt.Errorf("scope: a page of a listing: an object of %d bytes", n)
	}
	if int64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(f.r, buf); err != nil {
		return buf, unexpected(err)
	}
	if f.left > 0 {
		f.left -= n
	}
	return buf, nil
}

// skip reads past a field's value of the given wire type.
func (f *fields) skip(wire int) error {
	var n int64
	switch wire {
	case 0: // varint
		_, err := binary.ReadUvarint(f)
		return unexpected(err)
	case 1: // 64-bit
		n = 8
	case 5: // 32-bit
		n = 4
	case lenWire:
		var err error
		if n, err = f.length(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("scope: a page of a listing: wire type %d", wire)
	}
	if f.left >= 0 && n > f.left {
		return io.ErrUnexpectedEOF
	}
	if _, err := f.r.Discard(int(n)); err != nil {
		return unexpected(err)
	}
	if f.left > 0 {
		f.left -= n
	}
	return nil
}

// unexpected turns an end of the stream within a field into an error.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
