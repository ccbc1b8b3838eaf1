package snapshots

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"unicode/utf8"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// InputHead is what ReadInput learns of an encoded input snapshot without
// decoding it: enough for ingest to check, store and forward the encoding
// as it came.
type InputHead struct {
	Cluster string
	// Version is the version the snapshot claims.
	Version string
	Agent   *snapshotv1.AgentInfo
	// EncodedVersion is the version of the content as encoded: InputVersion's
	// definition applied to the bytes sent instead of to a fresh
	// deterministic encoding. The two agree when the encoding is canonical,
	// as EncodeInput's is; a sender that encodes otherwise (maps in another
	// order, fields repeated) gets a different EncodedVersion, never a
	// wrong match.
	EncodedVersion string
	// The number of objects of each kind, counted while reading.
	InputCounts
	// DiscoveredClusters are the distinct metadata.cluster values of the
	// meshes, workloads and destinations ("" for an object without one), in
	// the order of the encoding.
	DiscoveredClusters []string
	// ServiceRefClusters are the distinct spec.kube_service.ref.cluster
	// values of the destinations, "" included.
	ServiceRefClusters []string
}

// InputCounts are the number of objects of each kind in an input snapshot:
// what ingest holds against its per-cluster limits before it keeps a
// snapshot.
type InputCounts struct {
	Meshes, Workloads, Destinations                                     int
	VirtualMeshes, TrafficPolicies, AccessPolicies, VirtualDestinations int
	Settings, WasmDeploymentPolicies, AccessLogPolicies                 int
	UserIstioObjects                                                    int
}

// CountInput counts the objects of a decoded snapshot, as ReadInput counts
// them in its encoding.
func CountInput(s *snapshotv1.InputSnapshot) InputCounts {
	return InputCounts{
		Meshes: len(s.GetMeshes()), Workloads: len(s.GetWorkloads()), Destinations: len(s.GetDestinations()),
		VirtualMeshes: len(s.GetVirtualMeshes()), TrafficPolicies: len(s.GetTrafficPolicies()),
		AccessPolicies: len(s.GetAccessPolicies()), VirtualDestinations: len(s.GetVirtualDestinations()),
		Settings: len(s.GetSettings()), WasmDeploymentPolicies: len(s.GetWasmDeploymentPolicies()),
		AccessLogPolicies: len(s.GetAccessLogPolicies()), UserIstioObjects: len(s.GetUserIstioObjects()),
	}
}

// counter returns the count that an occurrence of the InputSnapshot field
// num adds one to, or nil for a field that is not a list of objects.
func (c *InputCounts) counter(num protowire.Number) *int {
	switch num {
	case inputMeshes:
		return &c.Meshes
	case inputWorkloads:
		return &c.Workloads
	case inputDestinations:
		return &c.Destinations
	case inputVirtualMeshes:
		return &c.VirtualMeshes
	case inputTrafficPolicies:
		return &c.TrafficPolicies
	case inputAccessPolicies:
		return &c.AccessPolicies
	case inputVirtualDestinations:
		return &c.VirtualDestinations
	case inputSettings:
		return &c.Settings
	case inputWasmDeploymentPolicies:
		return &c.WasmDeploymentPolicies
	case inputAccessLogPolicies:
		return &c.AccessLogPolicies
	case inputUserIstioObjects:
		return &c.UserIstioObjects
	}
	return nil
}

// ErrMalformed is returned by ReadInput for bytes that proto.Unmarshal
// would refuse as an InputSnapshot.
var ErrMalformed = errors.New("malformed snapshot encoding")

// maxDepth bounds message nesting as protobuf-go's decoder does.
const maxDepth = protowire.DefaultRecursionLimit

// The fields ReadInput reads, resolved once from the descriptors.
var (
	inputDesc      = (&snapshotv1.InputSnapshot{}).ProtoReflect().Descriptor()
	inputCluster   = field(inputDesc, "cluster").Number()
	inputVersion   = field(inputDesc, "version").Number()
	inputAgent     = field(inputDesc, "agent").Number()
	inputDiscovery = []protoreflect.FieldDescriptor{
		field(inputDesc, "meshes"), field(inputDesc, "workloads"), field(inputDesc, "destinations"),
	}
	inputMeshes, inputWorkloads, inputDestinations = inputDiscovery[0].Number(), inputDiscovery[1].Number(), inputDiscovery[2].Number()
	// The lists of user resources, counted against ingest's limits.
	inputVirtualMeshes          = field(inputDesc, "virtual_meshes").Number()
	inputTrafficPolicies        = field(inputDesc, "traffic_policies").Number()
	inputAccessPolicies         = field(inputDesc, "access_policies").Number()
	inputVirtualDestinations    = field(inputDesc, "virtual_destinations").Number()
	inputSettings               = field(inputDesc, "settings").Number()
	inputWasmDeploymentPolicies = field(inputDesc, "wasm_deployment_policies").Number()
	inputAccessLogPolicies      = field(inputDesc, "access_log_policies").Number()
	inputUserIstioObjects       = field(inputDesc, "user_istio_objects").Number()
	// inputSchema is InputSnapshot compiled for checking encodings.
	inputSchema = compileMessage(inputDesc, map[protoreflect.FullName]*wireMessage{})
	// Paths inside a mesh, workload or destination.
	metaClusterPath = func(fd protoreflect.FieldDescriptor) []pathStep {
		meta := field(fd.Message(), "metadata")
		return compilePath(meta, field(meta.Message(), "cluster"))
	}
	discoveredClusterPaths = [][]pathStep{
		metaClusterPath(inputDiscovery[0]), metaClusterPath(inputDiscovery[1]), metaClusterPath(inputDiscovery[2]),
	}
	serviceRefClusterPath = func() []pathStep {
		spec := field(inputDiscovery[2].Message(), "spec")
		kube := field(spec.Message(), "kube_service")
		ref := field(kube.Message(), "ref")
		return compilePath(spec, kube, ref, field(ref.Message(), "cluster"))
	}()
)

func field(md protoreflect.MessageDescriptor, name string) protoreflect.FieldDescriptor {
	fd := md.Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		panic(fmt.Sprintf("snapshots: %s has no field %q", md.FullName(), name))
	}
	return fd
}

// ReadInput checks that data is an encoding of an InputSnapshot that
// proto.Unmarshal accepts (well-formed, valid UTF-8 in every string, within
// the nesting limit) and reads its head, without decoding the rest. It
// returns an error wrapping ErrMalformed for anything proto.Unmarshal would
// refuse.
func ReadInput(data []byte) (InputHead, error) {
	var h InputHead
	if err := checkMessage(inputSchema, data, 0); err != nil {
		return h, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	// The encoding is valid: below, every tag and value parses.
	sum := sha256.New()
	// The agent field's occurrences, re-encoded as InputSnapshot fields:
	// occurrences of a message field merge, and decoding them together
	// merges them as the decoder would.
	var agent []byte
	// The content is hashed in runs of consecutive fields: [run, at).
	run, at := 0, 0
	for b := data; len(b) > 0; {
		num, typ, n := consumeTag(b)
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		value := b[n : n+m]
		b = b[n+m:]
		start := at
		at += n + m
		f := inputSchema.field(num)
		known := f != nil && f.matches(typ)
		if !known || inputVolatile[num] {
			// Unknown to the decoder, or not content: not hashed.
			sum.Write(data[run:start])
			run = at
		}
		if !known {
			continue
		}
		var v []byte
		if typ == protowire.BytesType {
			v, _ = consumeBytes(value)
		}
		// Each occurrence of a repeated message field is one element.
		if n := h.counter(num); n != nil {
			*n++
		}
		switch num {
		case inputVersion:
			h.Version = string(v)
		case inputAgent:
			agent = protowire.AppendTag(agent, num, protowire.BytesType)
			agent = protowire.AppendBytes(agent, v)
		case inputCluster:
			h.Cluster = string(v)
		case inputMeshes:
			h.DiscoveredClusters = addDistinct(h.DiscoveredClusters, lastString(v, discoveredClusterPaths[0]))
		case inputWorkloads:
			h.DiscoveredClusters = addDistinct(h.DiscoveredClusters, lastString(v, discoveredClusterPaths[1]))
		case inputDestinations:
			h.DiscoveredClusters = addDistinct(h.DiscoveredClusters, lastString(v, discoveredClusterPaths[2]))
			h.ServiceRefClusters = addDistinct(h.ServiceRefClusters, lastString(v, serviceRefClusterPath))
		}
	}
	sum.Write(data[run:at])
	if agent != nil {
		holder := &snapshotv1.InputSnapshot{}
		if err := proto.Unmarshal(agent, holder); err != nil {
			return InputHead{}, fmt.Errorf("%w: agent: %w", ErrMalformed, err)
		}
		h.Agent = holder.GetAgent()
	}
	v := VersionPrefix + hex.EncodeToString(sum.Sum(nil))
	if h.Agent != nil {
		v = contentVersion(&snapshotv1.InputSnapshot{
			Version: v, Agent: &snapshotv1.AgentInfo{Version: h.Agent.GetVersion(), Namespace: h.Agent.GetNamespace()},
		}, nil)
	}
	h.EncodedVersion = v
	return h, nil
}

// PolicyEncodings are the encodings of an input snapshot's TrafficPolicies
// and AccessPolicies as they are in the snapshot's encoding: Traffic[i] is
// the bytes that TrafficPolicies[i] of the decoded snapshot was decoded
// from, so equal bytes mean equal policies, whatever encoder made them.
type PolicyEncodings struct {
	Traffic, Access [][]byte
}

// ReadPolicies returns the policy encodings of data, an InputSnapshot
// encoding that proto.Unmarshal accepted (or ReadInput did), without
// decoding them. The slices alias data.
func ReadPolicies(data []byte) PolicyEncodings {
	var p PolicyEncodings
	for b := data; len(b) > 0; {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return PolicyEncodings{}
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return PolicyEncodings{}
		}
		value := b[n : n+m]
		b = b[n+m:]
		// Each occurrence is one element; an occurrence of another wire
		// type is unknown to the decoder, and in no list.
		if typ != protowire.BytesType || num != inputTrafficPolicies && num != inputAccessPolicies {
			continue
		}
		v, _ := consumeBytes(value)
		if num == inputTrafficPolicies {
			p.Traffic = append(p.Traffic, v)
		} else {
			p.Access = append(p.Access, v)
		}
	}
	return p
}

func addDistinct(set []string, v []byte) []string {
	for _, s := range set {
		if s == string(v) {
			return set
		}
	}
	return append(set, string(v))
}

// lastString returns the string at path in the message encoded in b as
// proto.Unmarshal would leave it: the occurrences of a message field merge,
// the last occurrence of a string wins, and a later member of the same
// oneof clears the path. "" when absent. b must be valid (checkMessage).
func lastString(b []byte, path []pathStep) []byte {
	s, _ := findString(b, path)
	return s
}

// pathStep is one field of a path that lastString follows.
type pathStep struct {
	num protowire.Number
	// clears are the other members of the field's oneof, with the wire
	// type each is decoded from.
	clears []pathClear
}

type pathClear struct {
	num protowire.Number
	f   *wireField
}

func compilePath(fds ...protoreflect.FieldDescriptor) []pathStep {
	steps := make([]pathStep, len(fds))
	for i, fd := range fds {
		steps[i].num = fd.Number()
		if o := fd.ContainingOneof(); o != nil {
			for j := range o.Fields().Len() {
				if other := o.Fields().Get(j); other != fd {
					steps[i].clears = append(steps[i].clears, pathClear{other.Number(), compileField(other, map[protoreflect.FullName]*wireMessage{})})
				}
			}
		}
	}
	return steps
}

func findString(b []byte, path []pathStep) ([]byte, bool) {
	step := path[0]
	var out []byte
	found := false
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		value := b[n : n+m]
		b = b[n+m:]
		if num != step.num || typ != protowire.BytesType {
			// Another member of the oneof clears ours. A field with a wire
			// type that its kind does not take is unknown to the decoder.
			for _, c := range step.clears {
				if c.num == num && c.f.matches(typ) {
					out, found = nil, false
				}
			}
			continue
		}
		v, _ := consumeBytes(value)
		if len(path) == 1 {
			out, found = v, true
		} else if s, ok := findString(v, path[1:]); ok {
			// A message occurrence that lacks the string merges into the
			// one before and leaves it.
			out, found = s, true
		}
	}
	return out, found
}

// wireMessage is a message type compiled for checking encodings: its
// fields by number, with what each takes.
type wireMessage struct {
	name protoreflect.FullName
	// dense holds fields 0..len-1; sparse the rest.
	dense  []*wireField
	sparse map[protowire.Number]*wireField
}

type fieldClass uint8

const (
	classScalar  fieldClass = iota
	classString             // UTF-8 checked
	classBytes              // including strings that are not checked
	classMessage            // messages and map entries
	classGroup
)

type wireField struct {
	name  protoreflect.FullName
	num   protowire.Number
	class fieldClass
	// want is the wire type of the field's kind.
	want protowire.Type
	// packable: a repeated scalar, which may also come packed.
	packable bool
	msg      *wireMessage
}

// matches reports whether the field may be decoded from wire type typ;
// protobuf-go treats a known field with another wire type as unknown.
func (f *wireField) matches(typ protowire.Type) bool {
	return typ == f.want || f.packable && typ == protowire.BytesType
}

func (m *wireMessage) field(num protowire.Number) *wireField {
	if int(num) < len(m.dense) {
		return m.dense[num]
	}
	return m.sparse[num]
}

// compileMessage compiles md and every message type it reaches; memo
// holds the ones compiled, which also ends recursive types.
func compileMessage(md protoreflect.MessageDescriptor, memo map[protoreflect.FullName]*wireMessage) *wireMessage {
	if m, ok := memo[md.FullName()]; ok {
		return m
	}
	m := &wireMessage{name: md.FullName()}
	memo[md.FullName()] = m
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		f := compileField(fd, memo)
		if num := fd.Number(); num < 64 {
			for int(num) >= len(m.dense) {
				m.dense = append(m.dense, nil)
			}
			m.dense[num] = f
		} else {
			if m.sparse == nil {
				m.sparse = map[protowire.Number]*wireField{}
			}
			m.sparse[num] = f
		}
	}
	return m
}

func compileField(fd protoreflect.FieldDescriptor, memo map[protoreflect.FullName]*wireMessage) *wireField {
	f := &wireField{name: fd.FullName(), num: fd.Number(), want: wireType(fd.Kind())}
	switch {
	case fd.IsMap() || fd.Kind() == protoreflect.MessageKind:
		f.class, f.want = classMessage, protowire.BytesType
		f.msg = compileMessage(fd.Message(), memo)
	case fd.Kind() == protoreflect.GroupKind:
		f.class = classGroup
		f.msg = compileMessage(fd.Message(), memo)
	case fd.Kind() == protoreflect.StringKind && enforceUTF8(fd):
		f.class = classString
	case fd.Kind() == protoreflect.StringKind || fd.Kind() == protoreflect.BytesKind:
		f.class = classBytes
	default:
		f.class = classScalar
		f.packable = fd.IsList()
	}
	return f
}

func wireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.BoolKind, protoreflect.EnumKind, protoreflect.Int32Kind, protoreflect.Sint32Kind,
		protoreflect.Uint32Kind, protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Uint64Kind:
		return protowire.VarintType
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.GroupKind:
		return protowire.StartGroupType
	default: // string, bytes, message
		return protowire.BytesType
	}
}

// checkMessage reports an error for an encoding of m that proto.Unmarshal
// would refuse.
func checkMessage(m *wireMessage, b []byte, depth int) error {
	if depth >= maxDepth {
		return errors.New("exceeded maximum recursion depth")
	}
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return fmt.Errorf("%s: %w", m.name, protowire.ParseError(n))
		}
		if num > protowire.MaxValidNumber {
			return fmt.Errorf("%s: invalid field number %d", m.name, num)
		}
		b = b[n:]
		if f := m.field(num); f != nil && f.matches(typ) {
			k, err := f.check(typ, b, depth)
			if err != nil {
				return fmt.Errorf("%s: %w", f.name, err)
			}
			b = b[k:]
			continue
		}
		k := protowire.ConsumeFieldValue(num, typ, b)
		if k < 0 {
			return fmt.Errorf("%s: field %d: %w", m.name, num, protowire.ParseError(k))
		}
		b = b[k:]
	}
	return nil
}

// check checks one value of f, whose wire type matches, and returns its
// length.
func (f *wireField) check(typ protowire.Type, b []byte, depth int) (int, error) {
	switch f.class {
	case classMessage:
		v, n := consumeBytes(b)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		return n, checkMessage(f.msg, v, depth+1)
	case classGroup:
		v, n := protowire.ConsumeGroup(f.num, b)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		return n, checkMessage(f.msg, v, depth+1)
	case classString, classBytes:
		v, n := consumeBytes(b)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		if f.class == classString && !utf8.Valid(v) {
			return 0, errors.New("invalid UTF-8")
		}
		return n, nil
	}
	if typ == protowire.BytesType { // packed
		v, n := consumeBytes(b)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		for len(v) > 0 {
			k := protowire.ConsumeFieldValue(0, f.want, v)
			if k < 0 {
				return 0, protowire.ParseError(k)
			}
			v = v[k:]
		}
		return n, nil
	}
	n := protowire.ConsumeFieldValue(0, typ, b)
	if n < 0 {
		return 0, protowire.ParseError(n)
	}
	return n, nil
}

// enforceUTF8 is protobuf-go's rule: proto3 strings are validated.
func enforceUTF8(fd protoreflect.FieldDescriptor) bool {
	return fd.Syntax() == protoreflect.Proto3
}

// consumeTag is protowire.ConsumeTag with the one-byte tags of fields 1 to
// 15 read inline: most of a snapshot's tags.
func consumeTag(b []byte) (protowire.Number, protowire.Type, int) {
	if len(b) > 0 && b[0] >= 1<<3 && b[0] < 0x80 {
		return protowire.Number(b[0] >> 3), protowire.Type(b[0] & 7), 1
	}
	return protowire.ConsumeTag(b)
}

// consumeBytes is protowire.ConsumeBytes with one-byte lengths read
// inline; anything else, errors included, is protowire's.
func consumeBytes(b []byte) ([]byte, int) {
	if len(b) > 0 && b[0] < 0x80 {
		if n := int(b[0]); n < len(b) {
			return b[1 : 1+n], 1 + n
		}
	}
	return protowire.ConsumeBytes(b)
}
