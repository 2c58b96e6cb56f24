// Package integration states the public contract of the organizations
// domain's integration events: the facts about organizations and their
// members that other systems hear about, as CloudEvents 1.0, when a
// destination is configured. It names each event's type and gives its
// data a Go type; the JSON Schemas under schemas/ in the repository
// describe the same events for consumers, and tests hold the two
// together.
//
// It follows the user domain's package of the same name: the events are
// not the domain's events but are made from them, by one function per
// integration event in package org; every type begins with the
// publisher's namespace (userintegration.Namespace, the same for every
// domain of the service) and ends with its version
// ([TypeMemberAdded] is
// "com.github.eventsourced.accounts.org.member_added.v1"); a type's
// contract does not change, so any change to its data is a new version;
// and on a broker an event is routed by its type without the namespace
// and the version (userintegration.Route: "org.member_added").
//
// An event is about an organization: its CloudEvents subject, and the key
// that keeps one subject's events in order in the outbox and on Kafka, is
// the organization's ID, not a member's. So a consumer gets one
// organization's events in the order of its stream's versions, and the
// erasure of a member's account, which deletes the events about that
// account that are still to be published, leaves those about its
// organizations alone: it appends their last word on the account, a
// [MemberRemoved] with the reason "erased". An event holds no address;
// members are named by their accounts' IDs.
//
// The organization's creation and its invitations are not published: the
// creator's [MemberAdded], at version 2, is the first event of an
// organization, and an invitation holds an address until it is accepted,
// which publishes the [MemberAdded] of the account that accepted it.
package integration
