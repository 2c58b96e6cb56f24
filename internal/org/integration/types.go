package integration

import userintegration "github.com/eventsourced/accounts/internal/user/integration"

// The types of the integration events: the CloudEvents type of each. The
// data of each is the Go type named after it ([MemberAdded] for
// [TypeMemberAdded]), described by the schema named after it under
// schemas/.
const (
	// TypeMemberAdded: an account became a member of an organization,
	// as its creator and first owner or by accepting an invitation
	// ([MemberAdded]).
	TypeMemberAdded = userintegration.Namespace + ".org.member_added.v1"
	// TypeRoleChanged: a member's role changed, by an owner or because
	// the last owner's account was erased ([RoleChanged]).
	TypeRoleChanged = userintegration.Namespace + ".org.role_changed.v1"
	// TypeMemberRemoved: an account is no longer a member: removed by an
	// owner, left, or erased ([MemberRemoved]).
	TypeMemberRemoved = userintegration.Namespace + ".org.member_removed.v1"
	// TypeDeleted: the organization was deleted, by an owner or with its
	// last member's account; every membership ends with it ([Deleted]).
	TypeDeleted = userintegration.Namespace + ".org.deleted.v1"
)

// Types returns the type of every integration event of the domain
// published today.
func Types() []string {
	return []string{TypeMemberAdded, TypeRoleChanged, TypeMemberRemoved, TypeDeleted}
}
