/** The real kubectl, which suites run against the control plane. */

/** The kubectl binary: $KUBECTL, else /usr/bin/kubectl. */
export const KUBECTL_PATH = process.env.KUBECTL ?? '/usr/bin/kubectl';
