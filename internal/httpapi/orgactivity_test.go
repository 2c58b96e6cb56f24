package httpapi_test

import (
	"testing"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/httpapi"
	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/user"
)

// TestDescribeOrganizationsActivity: the account page names each kind of
// an organization's activity in words, with the organization's name as
// its detail holds it, and says less, but nothing false, of a detail it
// cannot read.
func TestDescribeOrganizationsActivity(t *testing.T) {
	t.Parallel()
	id := uuid.MustParse("01900000-0000-7000-8000-000000000001")
	detail := func(role org.Role) string {
		return org.ActivityDetail{Org: id, Name: "École des Ponts", Role: role}.String()
	}
	for _, c := range []struct{ typ, detail, want string }{
		{org.ActivityCreated, detail(org.RoleOwner), "Created the organization École des Ponts"},
		{org.ActivityJoined, detail(org.RoleMember), "Joined the organization École des Ponts as a member"},
		{org.ActivityJoined, detail(org.RoleOwner), "Joined the organization École des Ponts as an owner"},
		{org.ActivityRoleChanged, detail(org.RoleOwner), "Made an owner of the organization École des Ponts"},
		{org.ActivityRoleChanged, detail(org.RoleMember), "No longer an owner of the organization École des Ponts"},
		{org.ActivityLeft, detail(""), "Left the organization École des Ponts"},
		{org.ActivityRemoved, detail(""), "Removed from the organization École des Ponts by an owner"},
		{org.ActivityDeleted, detail(""), "The organization École des Ponts was deleted"},
		{org.ActivityJoined, "not a detail", "Joined an organization as a member"},
		{org.ActivityRoleChanged, id.String() + " admin École", "Role changed in an organization"},
		{org.ActivityDeleted, "01900000 École", "An organization was deleted"},
	} {
		a := user.Activity{Type: c.typ, Detail: c.detail}
		if got := httpapi.DescribeActivity(a); got != c.want {
			t.Errorf("DescribeActivity(%s %q) = %q, want %q", c.typ, c.detail, got, c.want)
		}
	}
}
