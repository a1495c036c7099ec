# Hetzner Cloud servers booted from a Talos image (snapshot) with the machine config as user_data.
# Credentials: HCLOUD_TOKEN in the environment.

terraform {
  required_version = ">= 1.4"
  required_providers {
    hcloud = {
      source  = "hetznercloud/hcloud"
      version = "~> 1.45"
    }
  }
}

variable "cluster_name" {
  type = string
}

variable "machines" {
  description = "name => machine; user_data is the Talos machine config (secret)."
  type = map(object({
    role      = string
    user_data = string
    size      = optional(string)
    image     = optional(string)
    location  = optional(string)
  }))
  sensitive = true
}

variable "default_size" {
  description = "Server type when a machine has no size, e.g. cx23 (x86) or cax21 (arm64: needs an arm64 snapshot)."
  type        = string
  default     = "cx23"
}

variable "default_image" {
  description = "Id of the snapshot holding Talos (made from hcloud-amd64.raw.xz) when a machine has no image."
  type        = string
  default     = null
}

variable "location" {
  type    = string
  default = "nbg1"
}

variable "enable_ipv4" {
  description = "A public IPv4 costs extra on Hetzner; IPv6 is always on. Without IPv4 the nodes need registry_mirror."
  type        = bool
  default     = true
}

variable "registry_mirror" {
  description = "Set when the cluster's config routes ghcr.io and factory.talos.dev through a mirror reachable over IPv6 (or the network has NAT64): only then may enable_ipv4 be false."
  type        = bool
  default     = false
}

variable "firewall_ids" {
  type    = list(number)
  default = []
}

variable "labels" {
  type    = map(string)
  default = {}
}

locals {
  # Hetzner's limit on user data.
  user_data_limit = 32768

  names = toset(nonsensitive(keys(var.machines)))
  spec = {
    for name in local.names : name => {
      role     = nonsensitive(var.machines[name].role)
      size     = coalesce(nonsensitive(var.machines[name].size), var.default_size)
      image    = try(coalesce(nonsensitive(var.machines[name].image), var.default_image), null)
      location = coalesce(nonsensitive(var.machines[name].location), var.location)
    }
  }
  user_data_b64 = {
    for name in local.names : name => base64encode(var.machines[name].user_data)
  }
  user_data_bytes = {
    for name in local.names : name => nonsensitive(length(local.user_data_b64[name]) / 4 * 3 - length(regexall("=", local.user_data_b64[name])))
  }
}

resource "hcloud_server" "machine" {
  for_each = local.names

  name         = "${var.cluster_name}-${each.key}"
  server_type  = local.spec[each.key].size
  image        = local.spec[each.key].image
  location     = local.spec[each.key].location
  user_data    = var.machines[each.key].user_data
  firewall_ids = var.firewall_ids
  labels = merge(var.labels, {
    "rezus.cloud/cluster" = var.cluster_name
    "rezus.cloud/role"    = local.spec[each.key].role
  })

  public_net {
    ipv4_enabled = var.enable_ipv4
    ipv6_enabled = true
  }

  lifecycle {
    # Later config changes reach the node through the Talos API, not by recreating it.
    ignore_changes = [user_data, image]

    precondition {
      condition     = local.spec[each.key].image != null
      error_message = "hetzner: machine ${each.key} has no image: set providerSettings.hetzner.default_image to the id of a Talos snapshot${startswith(local.spec[each.key].size, "cax") ? " made from hcloud-arm64.raw.xz (server type ${local.spec[each.key].size} is arm64)" : " made from hcloud-amd64.raw.xz"}."
    }
    precondition {
      condition     = var.enable_ipv4 || var.registry_mirror
      error_message = "hetzner: enable_ipv4 = false makes IPv6-only servers, and ghcr.io and factory.talos.dev have no IPv6 address, so the nodes could not pull their images. Configure a registry mirror in the cluster's patches (machine.registries.mirrors) and set providerSettings.hetzner.registry_mirror = true, or keep enable_ipv4."
    }
    precondition {
      condition     = local.user_data_bytes[each.key] <= local.user_data_limit
      error_message = "hetzner: machine ${each.key}'s Talos config is ${local.user_data_bytes[each.key]} bytes; Hetzner user data holds at most 32768. Shorten its patches."
    }
  }
}

output "machines" {
  description = "name => { ipv4, ipv6 }"
  value = {
    for name, s in hcloud_server.machine : name => {
      ipv4 = s.ipv4_address != "" ? s.ipv4_address : null
      ipv6 = s.ipv6_address != "" ? s.ipv6_address : null
    }
  }
}
