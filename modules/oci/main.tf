# OCI compute instances booted from a Talos custom image; the machine config goes in the
# instance metadata as base64 user_data.
# Credentials (API key auth): OCI_TENANCY_OCID, OCI_USER_OCID, OCI_FINGERPRINT,
# OCI_PRIVATE_KEY (or OCI_PRIVATE_KEY_PATH), OCI_REGION — or the TF_VAR_-prefixed forms the
# provider also reads.

terraform {
  required_version = ">= 1.4"
  required_providers {
    oci = {
      source  = "oracle/oci"
      version = "~> 8.0"
    }
  }
}

variable "cluster_name" {
  type = string
}

variable "machines" {
  description = "name => machine; user_data is the Talos machine config (secret)."
  type = map(object({
    role                = string
    user_data           = string
    size                = optional(string)
    image               = optional(string)
    ocpus               = optional(number)
    memory_gb           = optional(number)
    availability_domain = optional(string)
  }))
  sensitive = true
}

variable "compartment_id" {
  type = string
}

variable "availability_domain" {
  type = string
}

variable "subnet_id" {
  description = "A subnet with an IPv6 prefix when enable_ipv6 is set."
  type        = string
}

variable "default_size" {
  description = "Shape when a machine has no size. The default, VM.Standard.A1.Flex, is arm64 (Ampere) and needs an oracle-arm64 image."
  type        = string
  default     = "VM.Standard.A1.Flex"
}

variable "default_image" {
  description = "OCID of the Talos custom image (oracle-amd64 or, for Ampere A1/A2 shapes, oracle-arm64) when a machine has no image."
  type        = string
  default     = null
}

variable "default_ocpus" {
  type    = number
  default = 2
}

variable "default_memory_gb" {
  type    = number
  default = 12
}

variable "boot_volume_gb" {
  type    = number
  default = 50
}

variable "enable_ipv6" {
  description = "Give each primary VNIC an IPv6 address. No default: the launch fails on a subnet without an IPv6 prefix."
  type        = bool
}

variable "public_ipv4" {
  description = "Give each primary VNIC a public IPv4 address (the subnet must be public)."
  type        = bool
  default     = true
}

locals {
  names = toset(nonsensitive(keys(var.machines)))
  spec = {
    for name in local.names : name => {
      role      = nonsensitive(var.machines[name].role)
      size      = coalesce(nonsensitive(var.machines[name].size), var.default_size)
      image     = try(coalesce(nonsensitive(var.machines[name].image), var.default_image), null)
      ocpus     = coalesce(nonsensitive(var.machines[name].ocpus), var.default_ocpus)
      memory_gb = coalesce(nonsensitive(var.machines[name].memory_gb), var.default_memory_gb)
      ad        = coalesce(nonsensitive(var.machines[name].availability_domain), var.availability_domain)
    }
  }
  # OCI caps metadata plus extendedMetadata at 32,000 bytes; user_data goes in base64.
  metadata_limit = 32000
  metadata_bytes = {
    for name in local.names : name => nonsensitive(length(base64encode(var.machines[name].user_data))) + length("user_data")
  }
}

resource "oci_core_instance" "machine" {
  for_each = local.names

  compartment_id      = var.compartment_id
  availability_domain = local.spec[each.key].ad
  display_name        = "${var.cluster_name}-${each.key}"
  shape               = local.spec[each.key].size

  # Only Flex shapes take a shape_config.
  dynamic "shape_config" {
    for_each = endswith(local.spec[each.key].size, ".Flex") ? [1] : []
    content {
      ocpus         = local.spec[each.key].ocpus
      memory_in_gbs = local.spec[each.key].memory_gb
    }
  }

  source_details {
    source_type             = "image"
    source_id               = local.spec[each.key].image
    boot_volume_size_in_gbs = var.boot_volume_gb
  }

  create_vnic_details {
    subnet_id        = var.subnet_id
    assign_public_ip = var.public_ipv4
    assign_ipv6ip    = var.enable_ipv6
  }

  # What the Talos image's own metadata declares (image_metadata.json), stated here too so an
  # image imported without it still boots.
  launch_options {
    network_type            = "PARAVIRTUALIZED"
    boot_volume_type        = "PARAVIRTUALIZED"
    remote_data_volume_type = "PARAVIRTUALIZED"
    firmware                = "UEFI_64"
  }

  # Talos reads its metadata from /opc/v2 only.
  instance_options {
    are_legacy_imds_endpoints_disabled = true
  }

  # Talos runs no Oracle Cloud Agent; the plugins would only report as failing.
  agent_config {
    are_all_plugins_disabled = true
    is_management_disabled   = true
    is_monitoring_disabled   = true
  }

  metadata = {
    user_data = base64encode(var.machines[each.key].user_data)
  }

  freeform_tags = {
    "rezus-cluster" = var.cluster_name
    "rezus-role"    = local.spec[each.key].role
  }

  lifecycle {
    # Later config changes reach the node through the Talos API, not by recreating it.
    ignore_changes = [metadata, source_details[0].source_id]

    precondition {
      condition     = local.spec[each.key].image != null
      error_message = "oci: machine ${each.key} has no image: set providerSettings.oci.default_image to the OCID of a Talos custom image${length(regexall("\\.A[0-9]+\\.", local.spec[each.key].size)) > 0 ? " built from oracle-arm64 (shape ${local.spec[each.key].size} is arm64)" : " built from oracle-amd64"}."
    }
    precondition {
      condition     = local.metadata_bytes[each.key] <= local.metadata_limit
      error_message = "oci: machine ${each.key}'s metadata is ${local.metadata_bytes[each.key]} bytes; OCI allows at most 32000. Shorten its patches."
    }
  }
}

# The instance itself does not expose its IPv6 address; the primary VNIC does.
data "oci_core_vnic_attachments" "machine" {
  for_each = local.names

  compartment_id = var.compartment_id
  instance_id    = oci_core_instance.machine[each.key].id
}

data "oci_core_vnic" "machine" {
  for_each = local.names

  vnic_id = data.oci_core_vnic_attachments.machine[each.key].vnic_attachments[0].vnic_id
}

output "machines" {
  description = "name => { ipv4, ipv6 }"
  value = {
    for name, i in oci_core_instance.machine : name => {
      ipv4 = i.public_ip != "" ? i.public_ip : null
      ipv6 = length(data.oci_core_vnic.machine[name].ipv6addresses) > 0 ? data.oci_core_vnic.machine[name].ipv6addresses[0] : null
    }
  }
}
