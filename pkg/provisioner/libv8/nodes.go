package libv8

import (
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// SelectedNodes wraps the node lister that the library reads a claim's
// selected node from. The library v8 does not call Provision while that
// node is missing, and so never reschedules the claim; through this it
// gets a node with only the name, and Provision asks the scheduler to pick
// again (a driver without topology ignores the node), as
// external-provisioner, whose library passes only the node's name.
func SelectedNodes(l corelisters.NodeLister) corelisters.NodeLister { return selectedNodes{l} }

type selectedNodes struct{ corelisters.NodeLister }

func (s selectedNodes) Get(name string) (*v1.Node, error) {
	n, err := s.NodeLister.Get(name)
	if apierrors.IsNotFound(err) {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
	}
	return n, err
}
