package wire

// Frame is what every frame type has, and so a pointer to one: its type
// name, and a copy of itself with the Type field set to that name, as it is
// written. Code that routes frames asks these instead of switching over the
// types, so a new frame type is added here and nowhere else.
type Frame interface {
	FrameType() string
	Typed() Frame
}

// Owned is a frame about one agent process: what it said, or what gputop
// recorded about it.
type Owned interface {
	Frame
	FramePID() int
}

func (f Hello) FrameType() string         { return TypeHello }
func (f Sample) FrameType() string        { return TypeSample }
func (f Samples) FrameType() string       { return TypeSamples }
func (f Mark) FrameType() string          { return TypeMark }
func (f OOM) FrameType() string           { return TypeOOM }
func (f Holders) FrameType() string       { return TypeHolders }
func (f Bye) FrameType() string           { return TypeBye }
func (f Snap) FrameType() string          { return TypeSnap }
func (f Status) FrameType() string        { return TypeStatus }
func (f Reply) FrameType() string         { return TypeReply }
func (f Request) FrameType() string       { return TypeRequest }
func (f Recording) FrameType() string     { return TypeRecording }
func (f Device) FrameType() string        { return TypeDevice }
func (f NVML) FrameType() string          { return TypeNVML }
func (f Procs) FrameType() string         { return TypeProcs }
func (f DevError) FrameType() string      { return TypeDevError }
func (f Row) FrameType() string           { return TypeRow }
func (f Ended) FrameType() string         { return TypeEnded }
func (f RowHeld) FrameType() string       { return TypeRowHeld }
func (f RowEdit) FrameType() string       { return TypeRowEdit }
func (f Host) FrameType() string          { return TypeHost }
func (f LayoutReading) FrameType() string { return TypeLayout }
func (f Hello) Typed() Frame              { f.Type = TypeHello; return f }
func (f Sample) Typed() Frame             { f.Type = TypeSample; return f }
func (f Samples) Typed() Frame            { f.Type = TypeSamples; return f }
func (f Mark) Typed() Frame               { f.Type = TypeMark; return f }
func (f OOM) Typed() Frame                { f.Type = TypeOOM; return f }
func (f Holders) Typed() Frame            { f.Type = TypeHolders; return f }
func (f Bye) Typed() Frame                { f.Type = TypeBye; return f }
func (f Snap) Typed() Frame               { f.Type = TypeSnap; return f }
func (f Status) Typed() Frame             { f.Type = TypeStatus; return f }
func (f Reply) Typed() Frame              { f.Type = TypeReply; return f }
func (f Request) Typed() Frame            { f.Type = TypeRequest; return f }
func (f Recording) Typed() Frame          { f.Type = TypeRecording; return f }
func (f Device) Typed() Frame             { f.Type = TypeDevice; return f }
func (f NVML) Typed() Frame               { f.Type = TypeNVML; return f }
func (f Procs) Typed() Frame              { f.Type = TypeProcs; return f }
func (f DevError) Typed() Frame           { f.Type = TypeDevError; return f }
func (f Row) Typed() Frame                { f.Type = TypeRow; return f }
func (f Ended) Typed() Frame              { f.Type = TypeEnded; return f }
func (f RowHeld) Typed() Frame            { f.Type = TypeRowHeld; return f }
func (f RowEdit) Typed() Frame            { f.Type = TypeRowEdit; return f }
func (f Host) Typed() Frame               { f.Type = TypeHost; return f }
func (f LayoutReading) Typed() Frame      { f.Type = TypeLayout; return f }
func (f Hello) FramePID() int             { return f.PID }
func (f OOM) FramePID() int               { return f.PID }
func (f Holders) FramePID() int           { return f.PID }
func (f Bye) FramePID() int               { return f.PID }
func (f Row) FramePID() int               { return f.PID }
func (f Ended) FramePID() int             { return f.PID }
func (f RowHeld) FramePID() int           { return f.PID }
func (f RowEdit) FramePID() int           { return f.PID }
func (f LayoutReading) FramePID() int     { return f.PID }

func (f FrameworkReading) FrameType() string { return TypeFramework }
func (f FrameworkReading) Typed() Frame      { f.Type = TypeFramework; return f }
func (f FrameworkReading) FramePID() int     { return f.PID }
