// Package aggregate is the layer every event-sourced aggregate of the
// service stands on. An aggregate is its state, an evolve that folds each
// of its events into that state ([Fold]), and the decisions of its
// commands, which read the state and return new events.
//
// The event types themselves, with their schema versions and upcasters,
// are named once in an [eventstore.Registry]; a fold decodes each event
// through it, so that it sees only current versions, and handles every
// type of its aggregate's category, with no silent default: an event of a
// type it does not handle fails the fold ([ErrUnhandled]), and a test
// of each aggregate checks that it handles them all
// ([eventstore.Registry.CheckHandles]).
//
// [Commands] runs a domain's commands: each one unit of work, run again
// when it loses a race on its stream's version, one span and one
// measurement of its duration and outcome, its events carrying the
// request and the command that caused them ([Metadata]). Its queries run
// read-only ([Commands.Read]), and its sweeps a batch per unit of work
// ([Commands.InBatches]) within the bounds both domains keep
// ([SweepMargin], [SweepBatch]).
//
// A limit on how often something may be asked for within a sliding span
// of time is kept in the stream of what it limits, from the times of the
// events there ([Window]).
package aggregate
